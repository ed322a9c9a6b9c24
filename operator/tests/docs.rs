//! What the docs state about the protocol is what the code does.

use std::path::Path;

use operator::fence::{FenceState, INITIAL_EPOCH, advance_from};

fn doc(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_docs_give_the_first_driver_the_epoch_the_operator_fences_it_to() {
    // The operator fences before the first driver too: from the store's initial epoch.
    let (_, first) = advance_from(&FenceState::default(), "uid/1", INITIAL_EPOCH);
    let text = doc("fenced-restart.md").replace('\n', " ");
    let stated = format!("The first driver runs under **epoch {}**", first.epoch);
    assert!(
        text.contains(&stated),
        "docs/fenced-restart.md must say {stated:?}"
    );
    assert!(
        !text.contains(&format!("first driver runs under epoch {INITIAL_EPOCH}.")),
        "docs/fenced-restart.md still gives the first driver epoch {INITIAL_EPOCH}"
    );
}
