//! Failure paths between the kernel and the stream, made to happen (issue 9).
