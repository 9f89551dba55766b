//! `report`: one self-contained HTML file of a trace, with time travel (issue 12). So far the
//! core the page will decode: the record stream of every space's mappings and page states.

pub mod decode;
pub mod format;
pub mod records;
pub mod wire;

#[cfg(test)]
mod tests;
