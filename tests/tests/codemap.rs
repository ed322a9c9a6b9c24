//! docs/architecture.md's codemap is true: each crate's modules are listed there, each once, and
//! bottom up: a module (its file and its folder) uses no module of its crate listed after it. So
//! the list is a dependency order, and there is no import circle between the crate's modules.
//! Unit tests (`#[cfg(test)]` and `tests.rs` files) may use anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The codemap's crates: (crate, folder, modules in their listed order).
fn codemap() -> Vec<(String, String, Vec<String>)> {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).unwrap();
    let start = doc
        .find("## Codemap")
        .expect("docs/architecture.md has a codemap");
    let end = doc[start..]
        .find("### Where new things go")
        .map_or(doc.len(), |i| start + i);
    let mut crates = Vec::new();
    for line in doc[start..end].lines() {
        if let Some(heading) = line.strip_prefix("### `") {
            // ### `crate` (`folder/`)…
            let (name, rest) = heading.split_once('`').unwrap();
            let folder = rest
                .split_once("(`")
                .and_then(|(_, rest)| rest.split_once("/`)"))
                .map(|(folder, _)| folder)
                .unwrap_or_else(|| panic!("the heading {line:?} names no folder"));
            crates.push((name.to_owned(), folder.to_owned(), Vec::new()));
        } else if let Some(item) = line.strip_prefix("- `") {
            let (module, _) = item.split_once("`:").unwrap_or_else(|| panic!("{line:?}"));
            let (_, _, modules) = crates.last_mut().expect("a module before any crate");
            modules.push(module.to_owned());
        }
    }
    crates
}

/// The top-level modules `lib.rs` declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|line| {
            let line = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
                .unwrap_or(line);
            line.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(str::to_owned)
        })
        .collect()
}

/// `dir/x.rs` and every `.rs` file under `dir/x/`, without unit-test files.
fn module_files(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut files = vec![src.join(format!("{module}.rs"))];
    let mut folders = vec![src.join(module)];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.retain(|path| path.is_file() && !path.ends_with("tests.rs"));
    files
}

/// The crate's top-level modules that `code` names through `crate::`, outside comments and unit
/// tests: `crate::x::…` and each item of `crate::{x, y::z}`.
fn uses(code: &str) -> BTreeSet<String> {
    let code = code.split("#[cfg(test)]").next().unwrap_or_default();
    let code: String = code
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |text: &str| -> String {
        text.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.insert(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            found.insert(ident(&item));
        } else {
            found.insert(ident(rest));
        }
    }
    found.retain(|name| !name.is_empty() && name != "self");
    found
}

#[test]
fn every_crates_modules_are_in_the_codemap_each_once() {
    let crates = codemap();
    let names: Vec<&str> = crates.iter().map(|(name, _, _)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "submission",
            "submitter-client",
            "submitter",
            "operator",
            "kubesim"
        ]
    );
    for (name, folder, listed) in &crates {
        let lib = std::fs::read_to_string(repo().join(folder).join("src/lib.rs")).unwrap();
        let listed_set: BTreeSet<String> = listed.iter().cloned().collect();
        assert_eq!(
            listed.len(),
            listed_set.len(),
            "{name}: a module listed twice"
        );
        assert_eq!(
            listed_set,
            declared(&lib),
            "{name}: the codemap's modules (left) and lib.rs's (right) differ"
        );
    }
}

#[test]
fn no_module_uses_one_listed_after_it() {
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, folder, listed) in codemap() {
        let src = repo().join(&folder).join("src");
        let position: BTreeMap<&str, usize> = listed
            .iter()
            .enumerate()
            .map(|(i, m)| (m.as_str(), i))
            .collect();
        for (i, module) in listed.iter().enumerate() {
            for file in module_files(&src, module) {
                let code = std::fs::read_to_string(&file).unwrap();
                for used in uses(&code) {
                    if position.get(used.as_str()).is_some_and(|&at| at > i) {
                        wrong.entry(name.clone()).or_default().push(format!(
                            "{} uses `{used}`, listed after `{module}`",
                            file.strip_prefix(repo()).unwrap_or(&file).display()
                        ));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn uses_finds_paths_and_groups() {
    let code = "use crate::a::X;\nuse crate::{b::Y, c, d::{e, f}};\n// crate::g\nfn x() { crate::h::y() }\n#[cfg(test)]\nuse crate::i;";
    let expected: BTreeSet<String> = ["a", "b", "c", "d", "h"].map(String::from).into();
    assert_eq!(uses(code), expected);
}

/// Every `.rs` file under `folder`, recursively.
fn rust_files(folder: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![folder.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.map(Result::unwrap) {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

#[test]
fn no_source_file_of_the_codemaps_crates_is_over_1000_lines() {
    let mut long = Vec::new();
    for (_, folder, _) in codemap() {
        for sub in ["src", "tests", "benches", "examples"] {
            for file in rust_files(&repo().join(&folder).join(sub)) {
                let lines = std::fs::read_to_string(&file).unwrap().lines().count();
                if lines > 1000 {
                    long.push(format!("{} ({lines} lines)", file.display()));
                }
            }
        }
    }
    assert!(long.is_empty(), "split by concept: {long:#?}");
}

/// A package whose `Cargo.toml` turns off test discovery (`autotests = false`) links its
/// integration tests into one binary, `tests/integration.rs`, which declares each file of its
/// `tests/` folder as a module: a file left out of that list would never be built or run.
#[test]
fn every_test_file_is_a_module_of_its_packages_one_test_binary() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find_map(|line| line.strip_prefix("members = ["))
        .expect("the workspace lists its members on one line");
    let mut missing = Vec::new();
    let mut binaries = 0;
    for member in members.trim_end_matches(']').split(',') {
        let folder = repo().join(member.trim().trim_matches('"'));
        let cargo = std::fs::read_to_string(folder.join("Cargo.toml")).unwrap();
        if !cargo.lines().any(|l| l.trim() == "autotests = false") {
            continue;
        }
        binaries += 1;
        let declared = std::fs::read_to_string(folder.join("tests/integration.rs"))
            .expect("a package without test discovery has tests/integration.rs");
        let modules = self::declared(&declared);
        for entry in std::fs::read_dir(folder.join("tests")).unwrap() {
            let path = entry.unwrap().path();
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            let is_test_file = path.extension().is_some_and(|e| e == "rs") && stem != "integration";
            if is_test_file && !modules.contains(stem) {
                missing.push(path.display().to_string());
            }
        }
    }
    assert!(
        binaries >= 4,
        "the packages with one test binary: {binaries}"
    );
    assert!(
        missing.is_empty(),
        "declare them in their tests/integration.rs: {missing:#?}"
    );
}
