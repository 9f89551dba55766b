//! The page's own sources (`page/`), included at build time: html.rs puts the style, the data
//! and the scripts in the template's place. The scripts share one namespace, `MEVI`, and run in
//! this order (each file is one concern; docs/report.md, "The page").

pub const TEMPLATE: &str = include_str!("page/index.html");
pub const STYLE: &str = include_str!("page/style.css");
pub const SCRIPTS: &[&str] = &[
    include_str!("page/js/core.js"),
    include_str!("page/js/wire.js"),
    include_str!("page/js/runs.js"),
    include_str!("page/js/records.js"),
    include_str!("page/js/sites.js"),
    include_str!("page/js/data.js"),
    include_str!("page/js/axis.js"),
    include_str!("page/js/resident.js"),
    include_str!("page/js/rss.js"),
    include_str!("page/js/processes.js"),
    include_str!("page/js/threads.js"),
    include_str!("page/js/space.js"),
    include_str!("page/js/flame.js"),
    include_str!("page/js/events.js"),
    include_str!("page/js/verify.js"),
    include_str!("page/js/api.js"),
    include_str!("page/js/live.js"),
    include_str!("page/js/main.js"),
];
