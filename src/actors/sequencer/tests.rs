//! The sequencer's ordering, driven through its inbox as the lanes drive it.

use std::time::{Duration, Instant};

use super::gate::{Gate, Held};
use super::*;
use crate::actors::state::StateHandle;
use crate::event::samples::{exit, fork};
use crate::event::{MapKind, VerifyPoint, WarningKind};

fn exec(pid: i32, space: SpaceId) -> Event {
    Event::Exec {
        pid,
        tid: pid,
        space,
        path: format!("/bin/p{pid}"),
        argv: vec![format!("p{pid}")],
        attached: false,
        followed: true,
    }
}

fn map(pid: i32, space: SpaceId, start: u64) -> Event {
    Event::Map {
        pid,
        tid: pid,
        space,
        start,
        end: start + 4096,
        prot: "rw-".into(),
        kind: MapKind::Anon,
        path: None,
        tracked: true,
        state: Some(crate::event::PageState::NotResident),
        follow: crate::event::Follow::Faults,
        cause: None,
        site: None,
    }
}

fn check(pid: i32, space: SpaceId) -> Event {
    Event::Verify {
        pid,
        space,
        point: VerifyPoint::Exit,
        checked_pages: 0,
        mismatched_pages: 0,
        first_mismatches: Vec::new(),
        skipped: None,
    }
}

fn start() -> Event {
    Event::Start {
        schema: crate::event::SCHEMA,
        version: "test".into(),
        argv: vec![],
        page_size: 4096,
        faults: true,
        follow: None,
        thp: None,
        wall_ns: None,
        wall: None,
        stack_depth: None,
        touch_stacks: None,
        attach: None,
        only: None,
        threads: None,
        regions: None,
        min_size: None,
        host: None,
        cgroup: None,
        container: None,
    }
}

/// Stamps events a microsecond apart, in the order the test lists them (the order they were
/// observed, not the order they reach the sequencer).
struct Clock(Instant);

impl Clock {
    fn at(&self, n: u64) -> Instant {
        self.0 + Duration::from_micros(n)
    }
    fn line(&self, n: u64, event: Event) -> SequencerMessage {
        SequencerMessage::Line(Stamped {
            at: self.at(n),
            event,
        })
    }
}

/// Runs a sequencer over `messages` (then closes its inbox) and returns what it wrote, checking
/// that `seq` has no gap and `t_ns` never decreases.
async fn sequence(started: Instant, messages: Vec<SequencerMessage>) -> Vec<StateMessage> {
    let (state, mut out) = StateHandle::for_test(1024);
    let (sequencer, handle) = Sequencer::new(1024, state, started);
    let task = tokio::spawn(sequencer.run(start()));
    for m in messages {
        handle.send(m).await;
    }
    drop(handle);
    task.await.expect("the sequencer ran to its end");
    let mut written = Vec::new();
    while let Ok(m) = out.try_recv() {
        written.push(m);
    }
    for (i, m) in written.iter().enumerate() {
        assert_eq!(m.line.seq, i as u64, "seq without gaps");
        if i > 0 {
            assert!(
                m.line.t_ns >= written[i - 1].line.t_ns,
                "t_ns never decreases"
            );
        }
    }
    assert!(matches!(written[0].line.event, Event::Start { .. }));
    written
}

fn events(written: &[StateMessage]) -> Vec<Event> {
    written[1..].iter().map(|m| m.line.event.clone()).collect()
}

/// A sequencer running on its own, fed and read while its inbox stays open (lines that go out
/// by themselves, after a window or a patience).
struct Running {
    handle: SequencerHandle,
    out: tokio::sync::mpsc::Receiver<StateMessage>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// With `window`, under fault records (`Sequencer::placing_records`).
    fn start(started: Instant, window: Option<Duration>) -> Self {
        let (state, out) = StateHandle::for_test(1024);
        let (sequencer, handle) = Sequencer::new(1024, state, started);
        let sequencer = match window {
            Some(window) => sequencer.placing_records(window),
            None => sequencer,
        };
        let task = tokio::spawn(sequencer.run(start()));
        Self { handle, out, task }
    }

    async fn send(&self, messages: impl IntoIterator<Item = SequencerMessage>) {
        for m in messages {
            self.handle.send(m).await;
        }
    }

    /// What was written once `n` lines are (the `start` line among them; 10 s at most), and a
    /// moment more.
    async fn written(&mut self, n: usize) -> Vec<Event> {
        let mut written = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while written.len() < n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
            written.extend(std::iter::from_fn(|| self.out.try_recv().ok()).map(|m| m.line.event));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        written.extend(std::iter::from_fn(|| self.out.try_recv().ok()).map(|m| m.line.event));
        written
    }

    /// Closes the inbox: what was written after.
    async fn finish(mut self) -> Vec<Event> {
        drop(self.handle);
        self.task.await.expect("the sequencer ran to its end");
        std::iter::from_fn(|| self.out.try_recv().ok())
            .map(|m| m.line.event)
            .collect()
    }
}

#[tokio::test]
async fn a_childs_exec_maps_and_exit_before_its_fork_line_come_after_it() {
    let clock = Clock(Instant::now());
    // Observed: 1 execs (space 0), maps, forks 2 (space 1); 2 unmaps, execs into space 2, maps,
    // exits; 1 exits. The parent's lane is slow: its fork line arrives last but one.
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(2, map(1, 0, 0x1000)),
        clock.line(4, map(2, 1, 0x2000)),
        SequencerMessage::Left { space: 1, pid: 2 },
        clock.line(5, exec(2, 2)),
        clock.line(6, map(2, 2, 0x3000)),
        clock.line(7, exit(2, 2)),
        clock.line(3, fork(1, 2, 0, 1)),
        clock.line(8, exit(1, 0)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![
            exec(1, 0),
            map(1, 0, 0x1000),
            fork(1, 2, 0, 1),
            map(2, 1, 0x2000),
            exec(2, 2),
            map(2, 2, 0x3000),
            exit(2, 2),
            exit(1, 0),
        ]
    );
}

/// Under `attach -f` there is no root: the attached process's `exec` line announces it, and a
/// child's exec still waits for the `fork` naming the child.
#[tokio::test]
async fn under_attach_a_childs_exec_waits_for_its_fork_line() {
    let clock = Clock(Instant::now());
    let attached = Event::Exec {
        pid: 1,
        tid: 1,
        space: 0,
        path: "/x".into(),
        argv: vec![],
        attached: true,
        followed: true,
    };
    // The child's exec arrives first of all, and must wait for its fork all the same.
    let messages = vec![
        SequencerMessage::Attaching,
        clock.line(5, exec(2, 2)),
        clock.line(1, attached.clone()),
        clock.line(4, map(2, 1, 0x2000)),
        SequencerMessage::Left { space: 1, pid: 2 },
        clock.line(6, exit(2, 2)),
        clock.line(3, fork(1, 2, 0, 1)),
        clock.line(7, exit(1, 0)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![
            attached,
            fork(1, 2, 0, 1),
            map(2, 1, 0x2000),
            exec(2, 2),
            exit(2, 2),
            exit(1, 0),
        ]
    );
}

#[tokio::test]
async fn an_exec_waits_for_every_line_of_the_space_left_so_exit_is_last() {
    let clock = Clock(Instant::now());
    // 1 execs into space 0, maps there, then execs into space 1 and exits at once; the old lane
    // is slow, so its last line and its `Left` arrive after the new lane's exec and exit.
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(3, exec(1, 1)),
        clock.line(4, exit(1, 1)),
        clock.line(2, map(1, 0, 0x1000)),
        SequencerMessage::Left { space: 0, pid: 1 },
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![exec(1, 0), map(1, 0, 0x1000), exec(1, 1), exit(1, 1)]
    );
}

#[tokio::test]
async fn the_roots_first_exec_announces_it_whatever_arrives_first() {
    let clock = Clock(Instant::now());
    // A line of a space nobody announced arrives first; the root's exec needs no `Left`.
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(3, map(2, 1, 0x1000)),
        clock.line(1, exec(1, 0)),
        clock.line(2, fork(1, 2, 0, 1)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![exec(1, 0), fork(1, 2, 0, 1), map(2, 1, 0x1000)]
    );
}

#[tokio::test]
async fn what_is_held_at_the_end_is_written_after_a_warning_in_lane_order() {
    let clock = Clock(Instant::now());
    // Process 5 (space 3) is never announced; its lines come out at the end, after a warning
    // naming it, and its exec keeps its place before its map.
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(5, map(5, 3, 0x1000)),
        clock.line(6, map(5, 3, 0x2000)),
        clock.line(2, map(1, 0, 0x1000)),
    ];
    let written = sequence(clock.0, messages).await;
    let events = events(&written);
    assert_eq!(events.len(), 5);
    assert_eq!(&events[..2], &[exec(1, 0), map(1, 0, 0x1000)]);
    match &events[2] {
        Event::Warning {
            what, pid, space, ..
        } => {
            assert_eq!(*what, WarningKind::Unannounced);
            assert_eq!((*pid, *space), (Some(5), Some(3)));
        }
        other => panic!("expected the warning, got {other:?}"),
    }
    assert_eq!(&events[3..], &[map(5, 3, 0x1000), map(5, 3, 0x2000)]);
}

#[tokio::test]
async fn a_held_check_keeps_its_probe() {
    let clock = Clock(Instant::now());
    let (done, answered) = std::sync::mpsc::sync_channel(1);
    let probe = Probe {
        pid: 2,
        pagemap: None,
        done,
    };
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        SequencerMessage::Check(
            Stamped {
                at: clock.at(3),
                event: check(2, 1),
            },
            probe,
        ),
        clock.line(2, fork(1, 2, 0, 1)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![exec(1, 0), fork(1, 2, 0, 1), check(2, 1)]
    );
    let probe = written[3].probe.as_ref().expect("the check kept its probe");
    assert_eq!(probe.pid, 2);
    probe.done.send(()).unwrap();
    answered.try_recv().expect("it is the same probe");
    assert!(written[..3].iter().all(|m| m.probe.is_none()));
}

#[tokio::test]
async fn a_check_read_through_a_thread_waits_for_its_space_only() {
    let clock = Clock(Instant::now());
    // A checkpoint's `verify` names the thread it read through (77), which no line announces:
    // holding it would hold the tracer, which waits for the check, forever.
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(2, check(77, 0)),
        clock.line(4, check(78, 1)),
        clock.line(3, fork(1, 2, 0, 1)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![exec(1, 0), check(77, 0), fork(1, 2, 0, 1), check(78, 1)]
    );
}

#[tokio::test]
async fn a_line_about_a_process_after_its_exit_is_not_held() {
    let clock = Clock(Instant::now());
    // Nothing can announce 1 again: holding the late line would hold its lane (and a check
    // behind it, which the tracer waits for) to the end.
    let late = Event::Warning {
        pid: Some(1),
        space: None,
        what: WarningKind::SharingDisagrees,
        message: "test".into(),
    };
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(2, exit(1, 0)),
        clock.line(3, map(1, 0, 0x1000)),
        clock.line(4, late.clone()),
        clock.line(5, check(1, 0)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![exec(1, 0), exit(1, 0), map(1, 0, 0x1000), late, check(1, 0)]
    );
}

#[tokio::test]
async fn a_lane_is_never_reordered_behind_a_held_line() {
    let clock = Clock(Instant::now());
    // Lines of no space (the tracer's) form one lane: a warning about 9 (announced later), then
    // one about 1, which could go at once: it stays behind.
    let warning = |pid| Event::Warning {
        pid: Some(pid),
        space: None,
        what: WarningKind::SharingDisagrees,
        message: "test".into(),
    };
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(3, warning(9)),
        clock.line(4, warning(1)),
        clock.line(2, fork(1, 9, 0, 4)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![exec(1, 0), fork(1, 9, 0, 4), warning(9), warning(1)]
    );
}

#[tokio::test]
async fn a_line_with_a_pid_nobody_announces_does_not_hold_its_lane() {
    let clock = Clock(Instant::now());
    // A lane that names a thread id as the process (16609): held, it would hold the check
    // behind it, and the tracer waiting for that check, to the end. It goes; replay reports it.
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(2, map(16609, 0, 0x1000)),
        clock.line(3, check(1, 0)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![exec(1, 0), map(16609, 0, 0x1000), check(1, 0)]
    );
}

#[tokio::test]
async fn a_warning_about_a_space_sent_before_its_creation_does_not_block_it() {
    let clock = Clock(Instant::now());
    let warning = Event::Warning {
        pid: Some(2),
        space: Some(1),
        what: WarningKind::NoUserfaultfd,
        message: "test".into(),
    };
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(3, warning.clone()),
        clock.line(2, fork(1, 2, 0, 1)),
        SequencerMessage::Left { space: 1, pid: 2 },
        clock.line(4, exec(2, 5)),
        clock.line(5, exit(2, 5)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![
            exec(1, 0),
            fork(1, 2, 0, 1),
            warning,
            exec(2, 5),
            exit(2, 5)
        ]
    );
}

#[test]
fn past_the_limit_the_lane_held_longest_goes_on_after_a_warning() {
    let clock = Clock(Instant::now());
    let held = |n: u64, event: Event| Held {
        stamped: Stamped {
            at: clock.at(n),
            event,
        },
        probe: None,
        seen: None,
    };
    let mut gate = Gate::with_limit(2);
    gate.root(1);
    gate.line(held(1, exec(1, 0)));
    gate.line(held(3, map(7, 2, 0x1000)));
    gate.line(held(2, map(8, 3, 0x1000)));
    assert_eq!(gate.held(), 2);
    gate.line(held(4, map(8, 3, 0x2000)));
    // Lane 3 has waited longest (its head is the oldest line): it goes, after a warning.
    assert_eq!(gate.held(), 1);
    let out: Vec<Event> = std::iter::from_fn(|| gate.next_ready())
        .map(|h| h.stamped.event)
        .collect();
    assert_eq!(out.len(), 4);
    assert_eq!(out[0], exec(1, 0));
    assert!(matches!(
        out[1],
        Event::Warning {
            what: WarningKind::Unannounced,
            space: Some(3),
            ..
        }
    ));
    assert_eq!(&out[2..], &[map(8, 3, 0x1000), map(8, 3, 0x2000)]);
}

#[tokio::test]
async fn a_reused_pids_exec_waits_for_the_fork_of_the_new_process() {
    let clock = Clock(Instant::now());
    // 2 is forked and exits; the kernel then gives pid 2 to a new child of 1, whose exec (in
    // its own new space) arrives before the parent's slow lane sends the fork naming it.
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(2, fork(1, 2, 0, 1)),
        clock.line(3, exit(2, 1)),
        SequencerMessage::Left { space: 3, pid: 2 },
        clock.line(5, exec(2, 4)),
        clock.line(4, fork(1, 2, 0, 3)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![
            exec(1, 0),
            fork(1, 2, 0, 1),
            exit(2, 1),
            fork(1, 2, 0, 3),
            exec(2, 4),
        ]
    );
}

/// Under fault records, a read's line named by a record goes back to its record's time among
/// the lines waiting, which go out a window after they came even while nothing else comes.
#[tokio::test]
async fn a_records_line_goes_out_at_its_time_and_waiting_lines_go_out_by_themselves() {
    let clock = Clock(Instant::now());
    let mut running = Running::start(clock.0, Some(Duration::from_millis(20)));
    let found = Event::Resident {
        pid: 1,
        tid: Some(1),
        space: 0,
        start: 0x9000,
        end: 0xa000,
        write: true,
        faults: 1,
        writer: None,
        by: Some(crate::event::FoundBy::Record),
        huge: false,
        site: None,
        sampled: 0,
        from: None,
        withheld: false,
    };
    running
        .send([
            SequencerMessage::Root { pid: 1 },
            clock.line(1, exec(1, 0)),
            clock.line(2, map(1, 0, 0x1000)),
            clock.line(4, map(1, 0, 0x2000)),
            // Read after the second map, faulted between the two.
            clock.line(3, found),
        ])
        .await;
    // Nothing more comes, and the inbox stays open: they go out by themselves.
    let written = running.written(5).await;
    let starts: Vec<Option<u64>> = written
        .iter()
        .map(|e| match e {
            Event::Map { start, .. } | Event::Resident { start, .. } => Some(*start),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [None, None, Some(0x1000), Some(0x9000), Some(0x2000)]
    );
    running.finish().await;
}

impl Clock {
    fn exiting(&self, n: u64, pid: i32, space: SpaceId) -> SequencerMessage {
        SequencerMessage::Exiting {
            space,
            pid,
            at: self.at(n),
        }
    }
}

/// A shell reaps its child and exits; the child's lane is slow, so the shell's `exit` reaches
/// the sequencer before the child's last line and its `exit`. Rule 4 writes the child's end
/// first: a replay never holds the shell without the child's last pages, nor both ends apart.
#[tokio::test]
async fn what_a_parent_did_after_its_child_ended_comes_after_the_childs_exit() {
    let clock = Clock(Instant::now());
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(2, fork(1, 2, 0, 1)),
        clock.line(3, map(2, 1, 0x1000)),
        clock.exiting(5, 2, 1),
        // The shell's next child, and its own end, seen after the child's end.
        clock.line(6, fork(1, 3, 0, 2)),
        clock.line(7, map(3, 2, 0x3000)),
        clock.exiting(8, 3, 2),
        clock.line(8, exit(3, 2)),
        clock.exiting(9, 1, 0),
        clock.line(9, exit(1, 0)),
        // The first child's lane, at last: a touch from before its end, then the end.
        clock.line(4, map(2, 1, 0x2000)),
        clock.line(5, exit(2, 1)),
    ];
    let written = sequence(clock.0, messages).await;
    assert_eq!(
        events(&written),
        vec![
            exec(1, 0),
            fork(1, 2, 0, 1),
            map(2, 1, 0x1000),
            map(2, 1, 0x2000),
            exit(2, 1),
            fork(1, 3, 0, 2),
            map(3, 2, 0x3000),
            exit(3, 2),
            exit(1, 0),
        ]
    );
}

/// Lines seen before an end go out at once; so does a check, whatever ended before it, and a
/// line a lane made (a first touch: its lane's order is the kernel's only within the space).
#[tokio::test]
async fn only_what_the_tracer_saw_after_an_end_waits_for_it_and_never_a_check() {
    let clock = Clock(Instant::now());
    let mut running = Running::start(clock.0, None);
    running
        .send([
            SequencerMessage::Root { pid: 1 },
            clock.line(1, exec(1, 0)),
            clock.line(2, fork(1, 2, 0, 1)),
            clock.exiting(5, 2, 1),
            clock.line(4, map(1, 0, 0x1000)),
            SequencerMessage::FromLane {
                stamped: Stamped {
                    at: clock.at(6),
                    event: map(1, 0, 0x5000),
                },
                seen: None,
            },
            SequencerMessage::Check(
                Stamped {
                    at: clock.at(6),
                    event: check(1, 0),
                },
                Probe {
                    pid: 1,
                    pagemap: None,
                    done: std::sync::mpsc::sync_channel(1).0,
                },
            ),
            clock.line(7, map(1, 0, 0x2000)),
        ])
        .await;
    let written = running.written(6).await;
    // The map seen after the end waits; the rest is out.
    assert_eq!(
        written[1..],
        [
            exec(1, 0),
            fork(1, 2, 0, 1),
            map(1, 0, 0x1000),
            map(1, 0, 0x5000),
            check(1, 0)
        ]
    );
    running.send([clock.line(5, exit(2, 1))]).await;
    let rest = running.finish().await;
    assert_eq!(rest, [exit(2, 1), map(1, 0, 0x2000)]);
}

/// Two lanes, each with a line stamped after the other's end: the one whose own end is later
/// waits, the other does not (its lane puts it before its own, earlier end), so nothing is held
/// to the end of the trace.
#[tokio::test]
async fn ends_on_two_lanes_never_hold_each_other() {
    let clock = Clock(Instant::now());
    let messages = vec![
        SequencerMessage::Root { pid: 1 },
        clock.line(1, exec(1, 0)),
        clock.line(2, fork(1, 2, 0, 1)),
        clock.exiting(10, 1, 0),
        clock.exiting(20, 2, 1),
        // Lane 0: a line stamped after 2's end, before 1's own exit in lane order.
        clock.line(25, map(1, 0, 0x1000)),
        // Lane 1: a line stamped after 1's end.
        clock.line(15, map(2, 1, 0x2000)),
        clock.line(20, exit(2, 1)),
        clock.line(10, exit(1, 0)),
    ];
    let written = sequence(clock.0, messages).await;
    let events = events(&written);
    assert!(
        !events.iter().any(|e| matches!(e, Event::Warning { .. })),
        "{events:#?}"
    );
    assert_eq!(
        events,
        vec![
            exec(1, 0),
            fork(1, 2, 0, 1),
            map(1, 0, 0x1000),
            exit(1, 0),
            map(2, 1, 0x2000),
            exit(2, 1),
        ]
    );
}

/// An end whose `exit` line never comes (its lane failed) holds what came after it for
/// `ENDING_PATIENCE` only, never to the end of the trace: then it goes on, in the order it came.
#[tokio::test]
async fn lines_held_for_an_exit_that_never_comes_go_on_after_a_while() {
    let started = Instant::now();
    let clock = Clock(started);
    let mut running = Running::start(clock.0, None);
    running
        .send([
            SequencerMessage::Root { pid: 1 },
            clock.line(1, exec(1, 0)),
            clock.line(2, fork(1, 2, 0, 1)),
            clock.exiting(3, 2, 1),
            clock.line(4, map(1, 0, 0x1000)),
        ])
        .await;
    let written = running.written(4).await;
    assert_eq!(written[3], map(1, 0, 0x1000));
    assert!(started.elapsed() >= gate::ENDING_PATIENCE);
    running.finish().await;
}

/// A CLONE_VM child execs and ends while another lane's end is still to be written, and its pid
/// is reused at once by a new CLONE_VM child whose lines wait (rule 4) for the first one's end.
/// The exec waits only for lines about its process from before it, so nothing is held once the
/// late end comes.
#[test]
fn a_reused_pid_waiting_for_an_end_does_not_hold_the_exec_of_the_process_before_it() {
    use crate::event::ForkKind;
    let clock = Clock(Instant::now());
    let seen = |n: u64, event: Event| Held {
        stamped: Stamped {
            at: clock.at(n),
            event,
        },
        probe: None,
        seen: Some(clock.at(n)),
    };
    let clone_vm = |child| Event::Fork {
        pid: 1,
        tid: 1,
        child,
        kind: ForkKind::CloneVm,
        space: 0,
        child_space: 0,
    };
    let mut gate = Gate::default();
    gate.root(1);
    gate.line(seen(1, exec(1, 0)));
    gate.line(seen(2, clone_vm(2)));
    gate.line(seen(3, fork(1, 3, 0, 5)));
    gate.exiting(5, 3, clock.at(4));
    gate.left(0, 2);
    gate.line(seen(5, exec(2, 7)));
    gate.exiting(7, 2, clock.at(6));
    gate.line(seen(6, exit(2, 7)));
    gate.line(seen(7, clone_vm(2)));
    gate.line(seen(8, map(2, 0, 0x1000)));
    gate.line(seen(4, exit(3, 5)));
    let mut written = Vec::new();
    while let Some(held) = gate.next_ready() {
        written.push(held.stamped.event);
    }
    assert_eq!(gate.held(), 0, "{written:#?}");
    assert_eq!(written.len(), 8);
    assert_eq!(written[3..5], [exit(3, 5), exec(2, 7)]);
}
