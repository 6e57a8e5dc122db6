//! The README's Rust section as a user copies it: the doctest (`ReadmeExample` in lib.rs) compiles and
//! runs its `rust` block, and this test checks that the block is what the doctest compiles — no line
//! hidden from the reader (rustdoc's `# ` lines), a `main` of its own — and that the `toml` block
//! beside it is a dependency table naming, by a path that exists in this repository, each workspace
//! crate the example `use`s, none of them one that may not be published.

use std::path::PathBuf;

fn repo() -> PathBuf {
    ostinato_testkit::repo_root().unwrap_or_else(|e| panic!("{e}"))
}

/// The fenced blocks of `lang` in the README section headed `heading`.
fn blocks(readme: &str, heading: &str, lang: &str) -> Vec<String> {
    let section = readme.split("\n## ").find(|s| s.starts_with(heading)).unwrap_or_else(|| panic!("the README has a `## {heading}` section"));
    let mut out = Vec::new();
    let mut lines = section.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("```{lang}") {
            out.push(lines.by_ref().take_while(|l| l.trim() != "```").map(|l| format!("{l}\n")).collect());
        }
    }
    out
}

#[test]
fn the_readme_rust_example_compiles_as_printed_with_the_dependencies_it_shows() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let rust = blocks(&readme, "From Rust", "rust");
    assert_eq!(rust.len(), 1, "one Rust example");
    let code = &rust[0];
    // rustdoc compiles `# `-prefixed lines but does not show them; a copy of the text would lack them.
    for l in code.lines() {
        assert!(!(l == "#" || l.starts_with("# ")), "a line hidden from the reader is in the README's Rust block: {l:?}");
    }
    assert!(code.contains("fn main() -> Result<(), Box<dyn std::error::Error>> {"), "a main of its own (rustdoc then wraps nothing):\n{code}");
    // The crates it uses, as cargo names them.
    let used: Vec<String> = code
        .lines()
        .filter_map(|l| l.strip_prefix("use "))
        .filter_map(|l| l.split("::").next())
        .filter(|c| !["std", "core", "alloc"].contains(c))
        .map(|c| c.replace('_', "-"))
        .collect();
    assert!(used.contains(&"ostinato".to_string()) && used.contains(&"ostinato-runtime".to_string()), "{used:?}");

    let toml_blocks = blocks(&readme, "From Rust", "toml");
    assert_eq!(toml_blocks.len(), 1, "one dependency block beside the example");
    let manifest: toml::Table = toml::from_str(&toml_blocks[0]).unwrap_or_else(|e| panic!("the README's dependency block is TOML: {e}"));
    let deps = manifest.get("dependencies").and_then(|d| d.as_table()).expect("a [dependencies] table");
    for name in &used {
        let dep = deps.get(name).and_then(|d| d.as_table()).unwrap_or_else(|| panic!("the example uses `{name}`; the dependency block must name it"));
        let path = dep.get("path").and_then(|p| p.as_str()).unwrap_or_else(|| panic!("`{name}`: a path dependency"));
        // `../ostinato/crates/NAME`: the crate's folder in a checkout of this repository.
        let in_repo =
            path.split_once("/crates/").map(|(_, rest)| repo().join("crates").join(rest)).unwrap_or_else(|| panic!("`{name}`: {path} names crates/…"));
        let cargo = std::fs::read_to_string(in_repo.join("Cargo.toml")).unwrap_or_else(|e| panic!("`{name}`: {path} is no crate of this repository: {e}"));
        let package: toml::Table = toml::from_str(&cargo).unwrap();
        let package = package["package"].as_table().unwrap();
        assert_eq!(package["name"].as_str(), Some(name.as_str()), "{path} holds another crate");
        assert_ne!(package.get("publish").and_then(|p| p.as_bool()), Some(false), "`{name}` is marked not to publish: no user depends on it");
    }
}
