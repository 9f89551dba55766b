//! `check --junit FILE`: the checks as a JUnit XML report, the format CI systems (GitLab,
//! Jenkins, GitHub's test reporters) show: one test case per figure checked, a failure for each
//! one over.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use super::Verdict;

pub(crate) fn write(path: &Path, trace: &str, verdicts: &[Verdict]) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    let failures = verdicts.iter().filter(|v| v.over()).count();
    writeln!(out, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        out,
        r#"<testsuites name="mevi-actors check" tests="{}" failures="{failures}">"#,
        verdicts.len()
    )?;
    writeln!(
        out,
        r#"  <testsuite name="{}" tests="{}" failures="{failures}">"#,
        escape(trace),
        verdicts.len()
    )?;
    for v in verdicts {
        let case = format!(
            r#"    <testcase classname="mevi-actors check" name="{}""#,
            escape(&v.title())
        );
        if v.over() {
            writeln!(out, "{case}>")?;
            writeln!(
                out,
                r#"      <failure message="{}" type="over"/>"#,
                escape(&v.failure())
            )?;
            writeln!(out, "    </testcase>")?;
        } else {
            writeln!(out, "{case}/>")?;
        }
    }
    writeln!(out, "  </testsuite>\n</testsuites>")?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// Text as an XML attribute's value.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters other than tab and line ends are not XML at all.
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}
