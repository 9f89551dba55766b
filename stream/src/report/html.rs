//! The report file: the page's template with its style, data and script put in place. Nothing
//! is fetched from anywhere: the file is the whole report.

use std::io::{self, Write};

use base64::engine::general_purpose::STANDARD;
use base64::write::EncoderWriter;

use super::meta::Meta;
use super::page::{SCRIPTS, STYLE, TEMPLATE};

/// Where the template takes each part (each marker alone on its line, once).
const STYLE_MARK: &str = "<!--MEVI:STYLE-->";
const DATA_MARK: &str = "<!--MEVI:DATA-->";
const SCRIPT_MARK: &str = "<!--MEVI:SCRIPT-->";
const TITLE_MARK: &str = "<!--MEVI:TITLE-->";

/// Writes the report of a whole trace to `out`.
pub fn write_report(out: &mut dyn Write, meta: &Meta, records: &[u8]) -> io::Result<()> {
    let json = serde_json::to_string(meta).map_err(io::Error::other)?;
    write(out, &meta.title, &json, records, Page::Offline)
}

/// Whether the page may connect back to where it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Page {
    /// A file: no request of any kind.
    Offline,
    /// Served by `run --serve`: its event stream, from the same origin, and nothing else.
    Live,
}

/// The template's policy, which forbids everything not allowed after it.
const NOTHING_ELSE: &str = "default-src 'none';";

/// Writes the page of `meta` (its JSON, with `title`) and `records` to `out`.
pub fn write(
    out: &mut dyn Write,
    title: &str,
    meta: &str,
    records: &[u8],
    page: Page,
) -> io::Result<()> {
    let template = match page {
        Page::Offline => std::borrow::Cow::Borrowed(TEMPLATE),
        Page::Live => TEMPLATE
            .replacen(NOTHING_ELSE, "default-src 'none'; connect-src 'self';", 1)
            .into(),
    };
    let mut rest = &*template;
    for mark in [TITLE_MARK, STYLE_MARK, DATA_MARK, SCRIPT_MARK] {
        let (before, after) = rest.split_once(mark).ok_or_else(|| {
            io::Error::other(format!("the page's template has no {mark} (a build fault)"))
        })?;
        out.write_all(before.as_bytes())?;
        match mark {
            TITLE_MARK => out.write_all(escape_text(title).as_bytes())?,
            STYLE_MARK => {
                out.write_all(b"<style>\n")?;
                out.write_all(STYLE.as_bytes())?;
                out.write_all(b"</style>")?;
            }
            DATA_MARK => write_data(out, meta, records)?,
            _ => {
                out.write_all(b"<script>\n")?;
                for script in SCRIPTS {
                    out.write_all(script.as_bytes())?;
                    out.write_all(b"\n")?;
                }
                out.write_all(b"</script>")?;
            }
        }
        rest = after;
    }
    out.write_all(rest.as_bytes())
}

fn write_data(out: &mut dyn Write, meta: &str, records: &[u8]) -> io::Result<()> {
    out.write_all(b"<script type=\"application/json\" id=\"mevi-meta\">")?;
    // `<` never appears raw, so no `</script>` in a path or argv can end the block early.
    out.write_all(meta.replace('<', "\\u003c").as_bytes())?;
    out.write_all(b"</script>\n<script type=\"application/octet-stream\" id=\"mevi-records\">")?;
    let mut encoder = EncoderWriter::new(&mut *out, &STANDARD);
    encoder.write_all(records)?;
    let out = encoder.finish()?;
    out.write_all(b"</script>")
}

/// Text for an HTML element's content.
fn escape_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_forbids_everything_else_and_has_each_mark_once() {
        assert_eq!(TEMPLATE.matches(NOTHING_ELSE).count(), 1);
        for mark in [TITLE_MARK, STYLE_MARK, DATA_MARK, SCRIPT_MARK] {
            assert_eq!(TEMPLATE.matches(mark).count(), 1, "{mark}");
        }
        let mut page = Vec::new();
        write(
            &mut page,
            "t <b>",
            "{\"a\":\"</script>\"}",
            &[1, 2, 3],
            Page::Live,
        )
        .unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.contains("connect-src 'self'"));
        assert!(page.contains("<title>t &lt;b&gt;</title>"));
        assert!(page.contains("{\"a\":\"\\u003c/script>\"}"));
        assert!(page.contains(">AQID</script>"));
    }
}
