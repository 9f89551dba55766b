//! Placeholder until the page lands (the page author replaces this file).
pub const TEMPLATE: &str = "<!doctype html><title><!--MEVI:TITLE--></title>\n<!--MEVI:STYLE-->\n<!--MEVI:DATA-->\n<!--MEVI:SCRIPT-->\n";
pub const STYLE: &str = "";
pub const SCRIPTS: &[&str] = &[];
