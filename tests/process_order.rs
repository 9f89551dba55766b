//! Process order across processes: tests/process_order.rs (issue 9).
