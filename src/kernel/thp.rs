//! The kernel's transparent huge page policy (`/sys/kernel/mm/transparent_hugepage`), which
//! decides which private anonymous ranges may get huge pages, and so which ones must not be
//! registered with a userfaultfd (registration takes their huge pages away: docs/kernel-facts.md).

use std::path::Path;

/// When a private anonymous range may get huge pages of some size (PMD or mTHP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpPolicy {
    /// Any range (unless the program said no: `MADV_NOHUGEPAGE`, `PR_SET_THP_DISABLE`).
    Always,
    /// Only ranges the program asked for with `MADV_HUGEPAGE`.
    Madvise,
    /// Never by fault (`MADV_COLLAPSE` still makes them, whatever the policy).
    Never,
}

const SYSFS: &str = "/sys/kernel/mm/transparent_hugepage";

/// A transparent huge page on x86_64 (a PMD): one fault maps it whole.
pub const HUGE_PAGE: u64 = 2 << 20;

impl ThpPolicy {
    /// The policy of this machine: the most permissive of the PMD setting and every mTHP size's
    /// (a size set to `inherit` takes the PMD setting). Never, without THP support.
    pub fn of_this_machine() -> Self {
        Self::read(Path::new(SYSFS))
    }

    fn read(dir: &Path) -> Self {
        let top = match setting(&dir.join("enabled")) {
            Some(Setting::Chosen(policy)) => policy,
            Some(Setting::Inherit) | None => ThpPolicy::Never,
        };
        // Nothing is more permissive: the sizes' settings are not read (each run reads these
        // files as it starts).
        if top == ThpPolicy::Always {
            return top;
        }
        let sizes = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("hugepages-"))
            .filter_map(|e| match setting(&e.path().join("enabled"))? {
                Setting::Chosen(policy) => Some(policy),
                Setting::Inherit => Some(top),
            });
        sizes.fold(top, Self::most_permissive)
    }

    /// As the sysfs setting names it.
    pub fn name(self) -> &'static str {
        match self {
            ThpPolicy::Always => "always",
            ThpPolicy::Madvise => "madvise",
            ThpPolicy::Never => "never",
        }
    }

    fn most_permissive(self, other: Self) -> Self {
        use ThpPolicy::*;
        match (self, other) {
            (Always, _) | (_, Always) => Always,
            (Madvise, _) | (_, Madvise) => Madvise,
            _ => Never,
        }
    }
}

/// A sysfs setting's bracketed choice (`always [madvise] never`), or `inherit`.
enum Setting {
    Chosen(ThpPolicy),
    Inherit,
}

fn setting(path: &Path) -> Option<Setting> {
    let text = std::fs::read_to_string(path).ok()?;
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    match &text[start..end] {
        "always" => Some(Setting::Chosen(ThpPolicy::Always)),
        "madvise" => Some(Setting::Chosen(ThpPolicy::Madvise)),
        "never" => Some(Setting::Chosen(ThpPolicy::Never)),
        "inherit" => Some(Setting::Inherit),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(dir: &Path, name: &str, text: &str) {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn the_most_permissive_size_decides() {
        let dir = std::env::temp_dir().join(format!("mevi-thp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        setting(&dir, "enabled", "always [madvise] never\n");
        setting(
            &dir,
            "hugepages-2048kB/enabled",
            "always [inherit] madvise never\n",
        );
        setting(
            &dir,
            "hugepages-64kB/enabled",
            "always inherit madvise [never]\n",
        );
        assert_eq!(ThpPolicy::read(&dir), ThpPolicy::Madvise);
        setting(
            &dir,
            "hugepages-64kB/enabled",
            "[always] inherit madvise never\n",
        );
        assert_eq!(ThpPolicy::read(&dir), ThpPolicy::Always);
        setting(&dir, "enabled", "always madvise [never]\n");
        setting(
            &dir,
            "hugepages-64kB/enabled",
            "always inherit madvise [never]\n",
        );
        assert_eq!(ThpPolicy::read(&dir), ThpPolicy::Never);
        std::fs::remove_dir_all(&dir).unwrap();
        // No THP support at all.
        assert_eq!(ThpPolicy::read(&dir), ThpPolicy::Never);
    }
}
