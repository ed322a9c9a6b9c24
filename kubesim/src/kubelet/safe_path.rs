//! Paths from the API joined under the kubelet's folders without escaping them.

use std::path::{Component, Path, PathBuf};

/// Joins a relative path from the API under `base`, refusing `..` and absolute parts so a pod
/// cannot write outside its folder.
pub fn safe_join(base: &Path, rel: &str) -> Option<PathBuf> {
    let mut out = base.to_path_buf();
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_join_refuses_escapes() {
        let base = Path::new("/w");
        assert_eq!(safe_join(base, "/opt/x"), Some(PathBuf::from("/w/opt/x")));
        assert_eq!(safe_join(base, "a/../../b"), None);
    }
}
