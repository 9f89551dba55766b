//! The event stream, schema 1: one [`Line`] per JSON object. `docs/schema.md` is the user-facing
//! description of every type here; change both together.

use serde::{Deserialize, Serialize};

pub const SCHEMA: u32 = 1;

/// Names one address space (one kernel mm) for the whole trace; never reused.
pub type SpaceId = u64;

/// Names one distinct call stack (a `site` line) for the whole trace, from 1.
pub type SiteId = u64;

/// One frame of a `site` line's stack, innermost first (docs/schema.md, `site`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Frame {
    /// The file mapped at the address, as `/proc/PID/maps` names it; absent for code in no file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The module's GNU build-id, in lowercase hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// The address's offset in `module`'s file: present exactly when `module` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// The absolute address, only when no file holds it (meaningful in its process alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// A function inlined into the frame after it (which has the same address).
    #[serde(default, skip_serializing_if = "is_false")]
    pub inlined: bool,
}

/// Why a stack ends before its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Truncated {
    /// `--stack-depth` frames were taken.
    Depth,
    /// The unwinder could not go on: no unwind information for an address, or a stack that
    /// could not be read.
    Unwind,
}

/// One line of the stream: the sequence number, the time, and what happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    pub seq: u64,
    pub t_ns: u64,
    #[serde(flatten)]
    pub event: Event,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForkKind {
    Fork,
    Vfork,
    CloneVm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapKind {
    Anon,
    Heap,
    Stack,
    Shmem,
    File,
    /// hugetlbfs memory (`MAP_HUGETLB`): huge pages reserved apart, never followed page by page.
    Hugetlb,
}

/// Why a `map` or `unmap` line was written when it is not a syscall's own change
/// (docs/schema.md): such lines change the replayed state all the same, but are not counted as
/// the program's maps and unmaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MapCause {
    /// The range as the kernel has it now, read again: after syscalls that raced over it, a
    /// failed or half-done syscall, a range given up to the program's own userfaultfd, or locked
    /// memory that `mremap` filled.
    Redescribe,
    /// The rest of the change on the line before: a mapping split where its pages' state
    /// changes, or the heap pages already present when the break moved.
    Split,
}

/// How a tracked range's pages are followed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Follow {
    /// Every first touch, as it happens, with the thread that made it (userfaultfd).
    #[default]
    Faults,
    /// By reading the page tables at layout changes, checkpoints, exits and on a timer: ranges
    /// that may get transparent huge pages, which a userfaultfd would take away.
    Scans,
}

impl Follow {
    pub fn is_faults(&self) -> bool {
        *self == Follow::Faults
    }
}

/// Where a `resident` line's pages came back from, when they had been in memory before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResidentFrom {
    /// Swapped out (an `evicted` line with `how` `swap`) and read back in.
    Swap,
}

/// How pages left memory without a release by the program (an `evicted` line).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictedHow {
    /// Written to swap: they still exist, and come back (a `resident` line with `from` `swap`)
    /// when touched.
    Swap,
    /// `MADV_FREE`d pages the kernel reclaimed: gone, as if discarded; a touch makes a new one.
    Reclaim,
}

/// How a `resident` line's pages were found, when not by a first touch's fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FoundBy {
    /// A read of the page tables of a range followed by scans: present then, made so by some
    /// thread since the last scan.
    Scan,
    /// A read of the page tables found it present (`--faults records`), and the kernel's record
    /// of a page fault there names the thread (`tid`) whose fault was the first since the page
    /// was last released.
    Record,
    /// No read found it (`--faults records`): the kernel's record of a page fault there names
    /// the thread, and a release (the line after it) dropped the page before any read could.
    /// Whether the fault read (the zero page) or wrote is not recorded: `write` is true, the
    /// most the page can have been.
    RecordOnly,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageState {
    NotResident,
    Resident,
}

/// An OOM kill, on the victim's `exit` line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OomKill {
    /// The memory cgroup the process was in (its path under the hierarchy's root), whose OOM
    /// kill count went up; absent when only the machine's count (`/proc/vmstat`) could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// That cgroup's memory limit in bytes; absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// The kernel log's line about the kill, when the log could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

/// Per-process line of the closing `summary` event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessSummary {
    pub pid: i32,
    /// As on its `exit` line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub argv: Vec<String>,
    pub resident_bytes: u64,
    pub peak_resident_bytes: u64,
    pub faults: u64,
    pub maps: u64,
    pub unmaps: u64,
    pub lifetime_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Killed by the OOM killer (as on its `exit` line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom: Option<OomKill>,
    /// Bytes of its pages that went to swap, came back from it, and were reclaimed after
    /// `MADV_FREE`, by its `evicted` and `resident` `from` `swap` lines.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub swapped_out_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub swapped_in_bytes: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reclaimed_bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTotals {
    pub processes: u64,
    pub spaces: u64,
    pub faults: u64,
    pub resident_events: u64,
    pub maps: u64,
    pub unmaps: u64,
    /// The largest resident figure of any one address space.
    pub peak_resident_bytes: u64,
    /// The largest sum, at any instant, of the resident bytes of every live address space: the
    /// whole tree's concurrent peak (`make -j2`'s compilers at once).
    #[serde(default)]
    pub tree_peak_resident_bytes: u64,
    pub lines: u64,
    /// `warning` lines written.
    #[serde(default)]
    pub warnings: u64,
    /// mevi-actors' own peak resident set, in bytes (`VmHWM` at the end): the tracer's cost in
    /// memory, without the traced program's.
    #[serde(default)]
    pub tracer_peak_rss_bytes: u64,
    /// With `--stacks`: `site` lines written (distinct stacks named by some line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sites: Option<u64>,
    /// Only with `--verify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<VerifyTotals>,
    /// Under `--faults scan`: the `unseen` lines' last figures, added over the spaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unseen: Option<UnseenTotals>,
    /// With `--only`: the spaces whose pages were not followed, their program not selected (an
    /// `exec` line with `followed` false, and the spaces forked from them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_selected_spaces: Option<u64>,
    /// With `--region` or `--min-size`: private anonymous mappings may be left out (written
    /// untracked), and checks compare the rest.
    #[serde(default, skip_serializing_if = "is_false")]
    pub mappings_selected: bool,
    /// With `--threads`: the `resident` lines of threads not selected, followed but not written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_not_selected: Option<NotWritten>,
}

/// `resident` lines followed and not written (`--threads`), and their first touches.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotWritten {
    pub lines: u64,
    pub first_touches: u64,
}

/// What scans may have missed, over every space (`unseen` lines).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnseenTotals {
    pub faults: u64,
    pub found: u64,
    pub at_most: u64,
}

/// The `verify` lines of a run, added up.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct VerifyTotals {
    /// `verify` lines that compared pages.
    pub points: u64,
    /// Of those, how many found a mismatch.
    pub failed_points: u64,
    /// Checks that did not run for a reason that leaves the stream exact: the process died
    /// meanwhile, or a thread of the space did not stop for a checkpoint in time.
    #[serde(default)]
    pub skipped_points: u64,
    /// `verify` lines that could not compare for any other reason (the page tables could not be
    /// read): checks that could not run.
    #[serde(default)]
    pub unchecked_points: u64,
    /// `warning` lines after which the stream is no longer exact
    /// ([`WarningKind::stream_still_exact`] is false).
    #[serde(default)]
    pub inexact_warnings: u64,
    /// Spaces whose first touches were not followed (`no_userfaultfd` and `not_followed`
    /// warnings): nothing of their pages could be checked.
    #[serde(default)]
    pub unfollowed_spaces: u64,
    /// Followed spaces left out of a check (a `checkpoint_skipped` warning) and never checked:
    /// nothing of their pages was compared.
    #[serde(default)]
    pub unchecked_spaces: u64,
    pub checked_pages: u64,
    pub mismatched_pages: u64,
}

/// What a `warning` line is about (docs/schema.md, warnings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningKind {
    /// The space got no userfaultfd: it is traced as mappings only.
    NoUserfaultfd,
    /// The space got no userfaultfd (no descriptor free in it, a seccomp filter of the
    /// program's that forbids a call the tracer injects, no capability): its pages are followed
    /// by page-table scans instead, as under `--faults scan`. Exact, with scan mode's limits.
    ScansInstead,
    /// The space's memory is not followed at all (a 32-bit program): the stream has its
    /// process lines only.
    NotFollowed,
    /// The space's lane can no longer read its userfaultfd: it released the descriptor (the
    /// program's threads fault natively again) and the space is traced as mappings only from
    /// here on.
    LaneFailed,
    /// The page tables of a range could not be read: its pages are not known (the range is
    /// written untracked, or its discard is an estimate).
    PagesUnknown,
    /// The clone flags and `kcmp` disagree on whether a child shares its parent's memory.
    SharingDisagrees,
    /// A space was not checked at a `--verify` checkpoint (one of its threads did not stop in
    /// time). A check that did not run: the stream is as exact as before.
    CheckpointSkipped,
    /// Lines about a process whose announcement never came, written at the end.
    Unannounced,
    /// An actor of mevi-actors failed; the trace ends here.
    ActorFailed,
    /// `--touch-stacks`: some first touches cannot be sampled (the reason is in the message:
    /// `perf_event_paranoid`, pinned-memory limits, file descriptors). Their lines are as exact
    /// as ever; they carry no site.
    NoTouchStacks,
    /// `--faults records`: fault records were lost (a thread's ring was full, or could not be
    /// had): the pages they were of are still found by reads, without their thread. The message
    /// says how many and whose.
    RecordsLost,
}

impl WarningKind {
    /// Whether the stream is still exact after it: `--verify` fails on any warning that is not.
    pub fn stream_still_exact(self) -> bool {
        matches!(
            self,
            WarningKind::SharingDisagrees
                | WarningKind::NoUserfaultfd
                | WarningKind::ScansInstead
                | WarningKind::NotFollowed
                | WarningKind::CheckpointSkipped
                | WarningKind::NoTouchStacks
                | WarningKind::RecordsLost
        )
    }
}

/// Where the stream was compared with the kernel's page tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyPoint {
    /// The last thread of a process at its exit stop: the mm is still whole.
    Exit,
    /// Every thread of every traced space stopped on purpose (`--verify-every`).
    Checkpoint,
}

/// A page's state as the stream has it, in a `verify` mismatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamPage {
    Resident,
    /// Evicted to swap (an `evicted` line).
    Swapped,
    NotResident,
    /// No mapping covers the page in the stream.
    Unmapped,
}

/// A page's state in the kernel's page tables, in a `verify` mismatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelPage {
    /// Present in `/proc/PID/pagemap`, in a private anonymous mapping.
    Present,
    /// Swapped out (a swap entry in the page tables), in a private anonymous mapping.
    Swapped,
    /// In a private anonymous mapping, not present.
    Absent,
    /// Not in any private anonymous mapping.
    Unmapped,
}

/// A run of pages where the stream and the kernel disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mismatch {
    pub start: u64,
    pub end: u64,
    pub stream: StreamPage,
    pub kernel: KernelPage,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    Start {
        schema: u32,
        version: String,
        argv: Vec<String>,
        page_size: u64,
        /// False with `--no-faults`: mappings are traced, first touches are not.
        faults: bool,
        /// How first touches are followed (`--faults`): `uffd`, each as it happens, with its
        /// thread; `scan`, by reading the page tables. Absent with `--no-faults`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        follow: Option<String>,
        /// The machine's transparent huge page policy (`always`, `madvise`, `never`): which
        /// ranges are followed by scans rather than faults.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thp: Option<String>,
        /// The wall-clock time of `t_ns = 0`, in nanoseconds since the Unix epoch, and the same
        /// instant in RFC 3339 (UTC): a line's absolute time is `wall_ns + t_ns`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall_ns: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wall: Option<String>,
        /// With `--stacks` or `--touch-stacks`: at most this many frames a stack.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stack_depth: Option<u32>,
        /// With `--touch-stacks N`: one page fault in N of each thread is sampled.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        touch_stacks: Option<u64>,
        /// `attach`: the running processes followed (then `argv` is the first one's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attach: Option<Vec<i32>>,
        /// `--only`: the patterns of the programs whose pages are followed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        only: Option<Vec<String>>,
        /// `--threads`: the patterns of the thread names whose `resident` lines are written.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        threads: Option<Vec<String>>,
        /// `--region`: only mappings overlapping one of these `[start, end)` are followed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        regions: Option<Vec<[u64; 2]>>,
        /// `--min-size`: only mappings at least this many bytes long, as made, are followed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min_size: Option<u64>,
        /// The machine's host name, the traced process's cgroup (v2) path as it started, and
        /// the container that cgroup belongs to, when it is one's (docs/fleet.md).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        host: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cgroup: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        container: Option<String>,
    },
    /// A call stack, the first time a line names it (`--stacks`).
    Site {
        id: SiteId,
        frames: Vec<Frame>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        truncated: Option<Truncated>,
    },
    Exec {
        pid: i32,
        tid: i32,
        space: SpaceId,
        path: String,
        argv: Vec<String>,
        /// Not an exec: `attach` began following this process, already running, here (its
        /// space starts as the snapshot that follows).
        #[serde(default, skip_serializing_if = "is_false")]
        attached: bool,
        /// `false` when `--only` does not select this program: its mappings are written, its
        /// pages not followed (every range `tracked: false`). Absent (true) otherwise.
        #[serde(default = "yes", skip_serializing_if = "is_true")]
        followed: bool,
    },
    Fork {
        pid: i32,
        tid: i32,
        child: i32,
        kind: ForkKind,
        space: SpaceId,
        child_space: SpaceId,
    },
    Thread {
        pid: i32,
        tid: i32,
        child: i32,
        space: SpaceId,
        /// The new thread's name (`comm`) as it starts: its creator's, until it names itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A thread named itself: `prctl(PR_SET_NAME)` (what `pthread_setname_np` does on the
    /// calling thread) returned 0. Written at the call's exit stop, in its space's order.
    ThreadName {
        pid: i32,
        tid: i32,
        space: SpaceId,
        /// Its name now (`comm`, as the kernel keeps it: at most 15 bytes).
        name: String,
    },
    ThreadExit {
        pid: i32,
        tid: i32,
        space: SpaceId,
        /// The thread's name (`comm`) at its exit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    Map {
        pid: i32,
        tid: i32,
        space: SpaceId,
        start: u64,
        end: u64,
        prot: String,
        kind: MapKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        tracked: bool,
        /// Only for tracked ranges.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<PageState>,
        #[serde(default, skip_serializing_if = "Follow::is_faults")]
        follow: Follow,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<MapCause>,
        /// With `--stacks`: the call stack of the thread that made the syscall (a `site` line's
        /// `id`, written before this line).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteId>,
    },
    Unmap {
        pid: i32,
        tid: i32,
        space: SpaceId,
        start: u64,
        end: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<MapCause>,
        /// With `--stacks`: the call stack of the thread that made the syscall (a `site` line's
        /// `id`, written before this line).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteId>,
    },
    Remap {
        pid: i32,
        tid: i32,
        space: SpaceId,
        old_start: u64,
        old_end: u64,
        new_start: u64,
        new_end: u64,
        dontunmap: bool,
        /// With `--stacks`: the call stack of the thread that made the syscall (a `site` line's
        /// `id`, written before this line).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteId>,
    },
    Brk {
        pid: i32,
        tid: i32,
        space: SpaceId,
        old: u64,
        new: u64,
        tracked: bool,
        #[serde(default, skip_serializing_if = "Follow::is_faults")]
        follow: Follow,
        /// With `--stacks`: the call stack of the thread that made the syscall (a `site` line's
        /// `id`, written before this line).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteId>,
    },
    Discard {
        pid: i32,
        tid: i32,
        space: SpaceId,
        start: u64,
        end: u64,
        advice: String,
        /// With `--stacks`: the call stack of the thread that made the syscall (a `site` line's
        /// `id`, written before this line).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteId>,
    },
    /// A successful `mprotect` (or `pkey_mprotect`): the mappings in the range have `prot` now.
    Protect {
        pid: i32,
        tid: i32,
        space: SpaceId,
        start: u64,
        end: u64,
        prot: String,
    },
    Resident {
        pid: i32,
        /// The thread that touched the pages; unknown (absent) for pages found by a scan.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tid: Option<i32>,
        space: SpaceId,
        start: u64,
        end: u64,
        write: bool,
        faults: u64,
        /// A first touch made by another process (`process_vm_writev`, a ptrace poke): the
        /// writer's pid, when known; `pid` is then the space's owner, and `tid == pid`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        writer: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<FoundBy>,
        /// Mapped by transparent huge pages (PMDs), as a scan found them.
        #[serde(default, skip_serializing_if = "is_false")]
        huge: bool,
        /// With `--touch-stacks`: the stack of its pages whose faults were sampled (a run
        /// holds the samples of one stack only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<SiteId>,
        /// With `--touch-stacks`: how many of its faults were sampled, all at `site`.
        #[serde(default, skip_serializing_if = "is_zero")]
        sampled: u64,
        /// Pages back from swap (no first touch): the stream had them evicted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<ResidentFrom>,
        /// Never in the stream: `--threads` does not select the thread, by its name when it
        /// touched. The state actor applies the line to its model and does not write it.
        #[serde(skip)]
        withheld: bool,
    },
    /// Pages the stream had resident that left memory with no release by the program: written
    /// to swap, or reclaimed after `MADV_FREE`; found by a read of the page tables, so at most a
    /// sample period late (exactly at a check).
    Evicted {
        pid: i32,
        space: SpaceId,
        start: u64,
        end: u64,
        how: EvictedHow,
    },
    /// Pages of a fork's copy-on-write that map a frame of this space's own now: a write copied
    /// them, or every other process let its copy go. Found by a read of the page tables (the
    /// kernel's "exclusively mapped" bit), so at most a sample period late. Until then the
    /// tree's figure counts each such frame once (docs/schema.md, "The tree's figure").
    Unshared {
        pid: i32,
        space: SpaceId,
        start: u64,
        end: u64,
    },
    Exit {
        pid: i32,
        tid: i32,
        space: SpaceId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        status: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<String>,
        /// The program: argv[0] of the process's last `exec` (a fork child's is its creator's),
        /// or its `comm` when no exec of it was seen.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Filled in by the state actor from the space's replayed state.
        resident_bytes: u64,
        peak_resident_bytes: u64,
        /// Killed by the kernel's OOM killer (`signal` is then `SIGKILL`): its memory cgroup
        /// counted an OOM kill as it died, and the kernel log, when readable, named it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        oom: Option<OomKill>,
    },
    /// Under `--faults scan`, at a space's last exit stop or the exec that leaves it: how much of
    /// it the scans may have missed. The kernel counted `faults` minor faults in the space's
    /// processes while they were in it; the stream found `found` of them (a page, or a huge page
    /// as one); so at most `at_most` pages were made resident and dropped between two scans.
    /// An upper bound: faults on files, shared memory and copy-on-write count too. A later line
    /// for the same space (after a vfork child's end, say) replaces an earlier one.
    Unseen {
        pid: i32,
        space: SpaceId,
        faults: u64,
        found: u64,
        at_most: u64,
    },
    /// A process's memory by the kernel's own count, every `--sample-ms` when it changed: what
    /// the stream does not follow page by page (file-backed and shared memory) beside what it
    /// does, and what is in swap (`/proc/PID/status`).
    Rss {
        pid: i32,
        space: SpaceId,
        anon: u64,
        file: u64,
        shmem: u64,
        swap: u64,
    },
    /// The stream so far compared with the kernel's page tables at a quiescent point.
    Verify {
        pid: i32,
        space: SpaceId,
        point: VerifyPoint,
        /// Filled in by the state actor, which holds the replayed state.
        checked_pages: u64,
        mismatched_pages: u64,
        first_mismatches: Vec<Mismatch>,
        /// Why nothing could be checked (the process died while being checked).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        skipped: Option<String>,
    },
    /// Something between the kernel and the stream went wrong: what is no longer exact from here
    /// on, or which lines had to be written out of their usual order, and why.
    Warning {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        space: Option<SpaceId>,
        what: WarningKind,
        /// The cause, for a person.
        message: String,
    },
    Summary {
        processes: Vec<ProcessSummary>,
        totals: RunTotals,
    },
}

impl Event {
    /// The address space this event belongs to, if any.
    pub fn space(&self) -> Option<SpaceId> {
        match self {
            Event::Exec { space, .. }
            | Event::Fork { space, .. }
            | Event::Thread { space, .. }
            | Event::ThreadName { space, .. }
            | Event::ThreadExit { space, .. }
            | Event::Map { space, .. }
            | Event::Unmap { space, .. }
            | Event::Remap { space, .. }
            | Event::Brk { space, .. }
            | Event::Discard { space, .. }
            | Event::Protect { space, .. }
            | Event::Resident { space, .. }
            | Event::Evicted { space, .. }
            | Event::Unshared { space, .. }
            | Event::Exit { space, .. }
            | Event::Unseen { space, .. }
            | Event::Rss { space, .. }
            | Event::Verify { space, .. } => Some(*space),
            Event::Warning { space, .. } => *space,
            Event::Start { .. } | Event::Site { .. } | Event::Summary { .. } => None,
        }
    }

    /// The process this event is about, if any (for `fork` and `thread`, the creator). Process
    /// order (docs/schema.md) is about these. None for `verify`: its `pid` is the thread the
    /// kernel's side was read through, which may be no process's id.
    pub fn pid(&self) -> Option<i32> {
        match self {
            Event::Exec { pid, .. }
            | Event::Fork { pid, .. }
            | Event::Thread { pid, .. }
            | Event::ThreadName { pid, .. }
            | Event::ThreadExit { pid, .. }
            | Event::Map { pid, .. }
            | Event::Unmap { pid, .. }
            | Event::Remap { pid, .. }
            | Event::Brk { pid, .. }
            | Event::Discard { pid, .. }
            | Event::Protect { pid, .. }
            | Event::Resident { pid, .. }
            | Event::Evicted { pid, .. }
            | Event::Unshared { pid, .. }
            | Event::Unseen { pid, .. }
            | Event::Rss { pid, .. }
            | Event::Exit { pid, .. } => Some(*pid),
            Event::Warning { pid, .. } => *pid,
            Event::Verify { .. }
            | Event::Start { .. }
            | Event::Site { .. }
            | Event::Summary { .. } => None,
        }
    }

    /// The space this event brings into existence in the stream, if it does.
    pub fn creates_space(&self) -> Option<SpaceId> {
        match self {
            Event::Exec { space, .. } => Some(*space),
            Event::Fork {
                kind: ForkKind::Fork,
                child_space,
                ..
            } => Some(*child_space),
            _ => None,
        }
    }
}

/// Linux's `PROT_*` bits, which the stream's `prot` comes from, written out here so that a
/// reader of the stream needs no kernel headers (mevi-actors' src/lib.rs checks them against
/// libc's).
const PROT_READ: u64 = 0x1;
const PROT_WRITE: u64 = 0x2;
const PROT_EXEC: u64 = 0x4;

/// `"rw-"` from `PROT_*` bits.
pub fn prot_string(prot: u64) -> String {
    let bit = |b: u64, c: char| if prot & b != 0 { c } else { '-' };
    [
        bit(PROT_READ, 'r'),
        bit(PROT_WRITE, 'w'),
        bit(PROT_EXEC, 'x'),
    ]
    .iter()
    .collect()
}

/// Linux's signals 1 to 31 by their conventional names (the same numbers on x86_64 and arm64);
/// the real-time ones above have none. Written out for the same reason as `PROT_*` (checked
/// against nix's there too).
const SIGNAL_NAMES: [&str; 31] = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// The conventional name of a signal (`"SIGSEGV"`), or its number.
pub fn signal_name(sig: i32) -> String {
    usize::try_from(sig)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| SIGNAL_NAMES.get(i))
        .map_or_else(|| format!("SIG{sig}"), |name| (*name).to_string())
}

impl Event {
    /// The `site` a layout line names, if any.
    pub fn site(&self) -> Option<SiteId> {
        match self {
            Event::Map { site, .. }
            | Event::Unmap { site, .. }
            | Event::Remap { site, .. }
            | Event::Brk { site, .. }
            | Event::Discard { site, .. }
            | Event::Resident { site, .. } => *site,
            _ => None,
        }
    }

    /// The `site` field of the lines that have one.
    pub fn site_field(&mut self) -> Option<&mut Option<SiteId>> {
        match self {
            Event::Map { site, .. }
            | Event::Unmap { site, .. }
            | Event::Remap { site, .. }
            | Event::Brk { site, .. }
            | Event::Discard { site, .. }
            | Event::Resident { site, .. } => Some(site),
            _ => None,
        }
    }
}

/// Lines for the unit tests of the modules that read the stream (and, with the `samples`
/// feature, of mevi-actors' actors).
#[cfg(any(test, feature = "samples"))]
pub mod samples {
    use super::{Event, ForkKind, SpaceId};

    /// `pid` forks `child` into a space of its own.
    pub fn fork(pid: i32, child: i32, space: SpaceId, child_space: SpaceId) -> Event {
        Event::Fork {
            pid,
            tid: pid,
            child,
            kind: ForkKind::Fork,
            space,
            child_space,
        }
    }

    /// `pid` exits with status 0.
    pub fn exit(pid: i32, space: SpaceId) -> Event {
        Event::Exit {
            pid,
            tid: pid,
            space,
            status: Some(0),
            signal: None,
            name: None,
            resident_bytes: 0,
            peak_resident_bytes: 0,
            oom: None,
        }
    }
}
