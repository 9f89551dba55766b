//! The report's overview curves: values over time in a bounded number of buckets. A bucket's
//! width doubles (neighbours merged) whenever the trace outgrows them, so memory stays fixed
//! however long the trace is; views zoomed in further read the records instead.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

/// At most this many buckets per curve.
pub const MAX_BUCKETS: u64 = 2048;
/// The first width: about a millisecond.
const FIRST_WIDTH_NS: u64 = 1 << 20;

/// A level over time (resident bytes): per bucket its largest value and its value at the end.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Level {
    /// The bucket of `max[0]`.
    pub first: u64,
    pub max: Vec<u64>,
    pub last: Vec<u64>,
    /// No more values: it is not carried on to the end.
    #[serde(skip)]
    pub closed: bool,
}

impl Level {
    /// `value` from bucket `i` on; the buckets since the last value keep that value.
    fn set(&mut self, i: u64, value: u64) {
        if self.max.is_empty() {
            self.first = i;
            self.max.push(value);
            self.last.push(value);
        }
        self.carry_to(i);
        let at = (i - self.first) as usize;
        self.max[at] = self.max[at].max(value);
        self.last[at] = value;
    }

    /// Extends the curve up to bucket `i` with its last value.
    fn carry_to(&mut self, i: u64) {
        let Some(&last) = self.last.last() else {
            return;
        };
        while self.first + (self.max.len() as u64) <= i {
            self.max.push(last);
            self.last.push(last);
        }
    }

    fn halve(&mut self) {
        let (max, last) = (
            std::mem::take(&mut self.max),
            std::mem::take(&mut self.last),
        );
        let first = self.first / 2;
        for (k, (m, l)) in max.into_iter().zip(last).enumerate() {
            let j = ((self.first + k as u64) / 2 - first) as usize;
            if j == self.max.len() {
                self.max.push(m);
                self.last.push(l);
            } else {
                self.max[j] = self.max[j].max(m);
                self.last[j] = l;
            }
        }
        self.first = first;
    }
}

/// The kernel's figures of a space over its life (`rss` lines): level `k` is the sum of the
/// first `k + 1` of anon, file, shmem and swap. A running sum's largest in a bucket is the
/// largest the stacked bands reached, so they are drawn without overlapping or overstating.
#[derive(Clone, Debug, Default)]
pub struct RssLevels(pub [Level; 4]);

/// The kinds of `rss` lines, in the order their running sums are kept.
pub const RSS_KINDS: [&str; 4] = ["anon", "file", "shmem", "swap"];

impl RssLevels {
    fn set(&mut self, i: u64, figures: [u64; 4]) {
        let mut sum = 0u64;
        for (level, bytes) in self.0.iter_mut().zip(figures) {
            sum = sum.saturating_add(bytes);
            level.closed = false;
            level.set(i, sum);
        }
    }

    fn halve(&mut self) {
        self.0.iter_mut().for_each(Level::halve);
    }
}

/// A level of [`RssLevels`] as written: `last` whole, `max` only where it is not `last`, as
/// `peaks`, `[k, max]` (figures that only grew or stayed within a bucket, most of them when
/// they are sampled every few milliseconds, cost nothing more).
#[derive(Serialize)]
struct CompactLevel<'a> {
    first: u64,
    last: &'a [u64],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    peaks: Vec<[u64; 2]>,
}

/// `[level, level, …]`, a level the same as the one before it (a kind with nothing, such as
/// swap on most runs) as `null`: no bytes for figures that add nothing.
impl Serialize for RssLevels {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for (k, level) in self.0.iter().enumerate() {
            let same = k > 0 && {
                let below = &self.0[k - 1];
                below.first == level.first && below.max == level.max && below.last == level.last
            };
            if same {
                seq.serialize_element(&None::<CompactLevel>)?;
            } else {
                let peaks = (level.max.iter().zip(&level.last).enumerate())
                    .filter(|(_, (max, last))| max != last)
                    .map(|(k, (&max, _))| [k as u64, max])
                    .collect();
                seq.serialize_element(&CompactLevel {
                    first: level.first,
                    last: &level.last,
                    peaks,
                })?;
            }
        }
        seq.end()
    }
}

/// A count over time (first-touch pages): per bucket the sum.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Count {
    pub first: u64,
    pub n: Vec<u64>,
}

impl Count {
    fn add(&mut self, i: u64, n: u64) {
        if self.n.is_empty() {
            self.first = i;
        }
        let at = (i - self.first) as usize;
        if at >= self.n.len() {
            self.n.resize(at + 1, 0);
        }
        self.n[at] += n;
    }

    fn halve(&mut self) {
        let n = std::mem::take(&mut self.n);
        let first = self.first / 2;
        for (k, v) in n.into_iter().enumerate() {
            let j = ((self.first + k as u64) / 2 - first) as usize;
            if j == self.n.len() {
                self.n.push(v);
            } else {
                self.n[j] += v;
            }
        }
        self.first = first;
    }
}

/// Every curve of the report, on one time axis.
#[derive(Debug, Serialize)]
pub struct Buckets {
    pub width_ns: u64,
    /// Buckets up to the trace's end.
    pub n: u64,
    /// The whole tree's resident bytes.
    pub tree: Level,
    /// Each space's resident bytes, over its life.
    pub spaces: BTreeMap<u64, Level>,
    /// First-touch pages per thread (by tid; 0 = found by a scan).
    pub touches: BTreeMap<i32, Count>,
    /// Each space's figures by the kernel's count (`rss` lines), over its life from its first.
    pub rss: BTreeMap<u64, RssLevels>,
    #[serde(skip)]
    latest_ns: u64,
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets {
            width_ns: FIRST_WIDTH_NS,
            n: 0,
            tree: Level::default(),
            spaces: BTreeMap::new(),
            touches: BTreeMap::new(),
            rss: BTreeMap::new(),
            latest_ns: 0,
        }
    }
}

impl Buckets {
    /// The bucket of `t_ns`, widening every curve until it fits. A time before one already
    /// seen (a stream whose time goes back, a problem `replay` reports) counts as that one:
    /// curves only move forward.
    fn bucket(&mut self, t_ns: u64) -> u64 {
        let t_ns = t_ns.max(self.latest_ns);
        self.latest_ns = t_ns;
        while t_ns / self.width_ns >= MAX_BUCKETS {
            self.width_ns *= 2;
            self.tree.halve();
            self.spaces.values_mut().for_each(Level::halve);
            self.touches.values_mut().for_each(Count::halve);
            self.rss.values_mut().for_each(RssLevels::halve);
        }
        let i = t_ns / self.width_ns;
        self.n = self.n.max(i + 1);
        i
    }

    pub fn tree(&mut self, t_ns: u64, bytes: u64) {
        let i = self.bucket(t_ns);
        self.tree.set(i, bytes);
    }

    pub fn space(&mut self, t_ns: u64, space: u64, bytes: u64) {
        let i = self.bucket(t_ns);
        let level = self.spaces.entry(space).or_default();
        level.closed = false;
        level.set(i, bytes);
    }

    /// The space has no process from `t_ns` on: its curves stop there. The kernel's figures
    /// keep their last value up to then (a line comes only when they change).
    pub fn space_ended(&mut self, t_ns: u64, space: u64) {
        self.space(t_ns, space, 0);
        if let Some(level) = self.spaces.get_mut(&space) {
            level.closed = true;
        }
        let i = self.bucket(t_ns);
        if let Some(levels) = self.rss.get_mut(&space) {
            for level in &mut levels.0 {
                level.carry_to(i);
                level.closed = true;
            }
        }
    }

    /// An `rss` line of `space`: `[anon, file, shmem, swap]` in bytes.
    pub fn rss(&mut self, t_ns: u64, space: u64, figures: [u64; 4]) {
        let i = self.bucket(t_ns);
        self.rss.entry(space).or_default().set(i, figures);
    }

    pub fn touches(&mut self, t_ns: u64, tid: i32, pages: u64) {
        let i = self.bucket(t_ns);
        self.touches.entry(tid).or_default().add(i, pages);
    }

    /// The trace ended at `t_ns`: open curves are carried on to it.
    pub fn finish(&mut self, t_ns: u64) {
        let i = self.bucket(t_ns);
        self.tree.carry_to(i);
        for level in self.spaces.values_mut().filter(|l| !l.closed) {
            level.carry_to(i);
        }
        for levels in self.rss.values_mut() {
            for level in levels.0.iter_mut().filter(|l| !l.closed) {
                level.carry_to(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_keeps_its_peak_and_its_last_value_through_widening() {
        let mut b = Buckets::default();
        b.tree(0, 10);
        b.tree(5, 50);
        b.tree(6, 20);
        // Far enough to widen several times.
        let far = FIRST_WIDTH_NS * MAX_BUCKETS * 4;
        b.tree(far, 7);
        b.finish(far + 1);
        assert!(b.tree.max.len() as u64 <= MAX_BUCKETS);
        assert_eq!(b.tree.first, 0);
        assert_eq!(b.tree.max[0], 50, "the peak survives merging");
        assert_eq!(b.tree.last[0], 20, "the value at the bucket's end");
        assert_eq!(*b.tree.last.last().unwrap(), 7);
        assert_eq!(b.tree.max.len() as u64, b.n);
    }

    #[test]
    fn a_space_curve_covers_its_life_only() {
        let mut b = Buckets::default();
        let w = FIRST_WIDTH_NS;
        b.space(3 * w, 1, 4096);
        b.space(5 * w + 1, 1, 8192);
        b.space_ended(7 * w, 1);
        b.finish(20 * w);
        let s = &b.spaces[&1];
        assert_eq!(s.first, 3);
        assert_eq!(s.max, [4096, 4096, 8192, 8192, 8192]);
        assert_eq!(s.last, [4096, 4096, 8192, 8192, 0]);
        assert_eq!(b.n, 21);
    }

    #[test]
    fn a_time_that_goes_back_counts_as_the_latest() {
        let mut b = Buckets::default();
        let w = FIRST_WIDTH_NS;
        b.space(5 * w, 1, 10);
        b.touches(5 * w, 3, 1);
        b.space(w, 1, 20);
        b.touches(0, 3, 1);
        b.tree(0, 7);
        assert_eq!(b.spaces[&1].first, 5);
        assert_eq!(b.spaces[&1].last, [20]);
        assert_eq!(b.touches[&3].n, [2]);
        assert_eq!(b.tree.first, 5);
    }

    #[test]
    fn the_kernels_figures_are_running_sums_kept_to_the_spaces_end() {
        let mut b = Buckets::default();
        let w = FIRST_WIDTH_NS;
        b.space(w, 1, 0);
        b.rss(2 * w, 1, [10, 20, 30, 0]);
        b.rss(4 * w, 1, [15, 20, 5, 0]);
        b.space_ended(6 * w, 1);
        b.finish(9 * w);
        let r = &b.rss[&1].0;
        assert_eq!(r[0].first, 2);
        assert_eq!(r[0].last, [10, 10, 15, 15, 15], "anon, kept to the end");
        assert_eq!(r[1].last, [30, 30, 35, 35, 35], "anon + file");
        assert_eq!(
            r[2].max,
            [60, 60, 60, 40, 40],
            "anon + file + shmem, largest"
        );
        assert_eq!(r[2].last, [60, 60, 40, 40, 40]);
        // No swap: its running sum is shmem's, written as null.
        let json = serde_json::to_value(&b.rss[&1]).unwrap();
        assert!(json[3].is_null(), "{json}");
        assert_eq!(json[2]["last"], serde_json::json!([60, 60, 40, 40, 40]));
        assert_eq!(
            json[2]["peaks"],
            serde_json::json!([[2, 60]]),
            "max where not last"
        );
        // Figures that only grew: no peaks.
        assert!(json[0].get("peaks").is_none(), "{json}");
        // Widening merges them as any level.
        b.rss(w * MAX_BUCKETS * 2, 2, [1, 0, 0, 0]);
        assert!(b.rss[&1].0[2].max.len() < 5);
        assert_eq!(*b.rss[&1].0[2].max.first().unwrap(), 60);
    }

    #[test]
    fn counts_add_up_across_merges() {
        let mut b = Buckets::default();
        let w = FIRST_WIDTH_NS;
        for i in 0..(MAX_BUCKETS * 3) {
            b.touches(i * w, 7, 1);
        }
        let c = &b.touches[&7];
        assert_eq!(c.n.iter().sum::<u64>(), MAX_BUCKETS * 3);
        assert!(c.n.len() as u64 <= MAX_BUCKETS);
    }
}
