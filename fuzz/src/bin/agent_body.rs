//! Fuzz target `agent_body`: see [`fuzz::agent_body`] for the property it checks.

fn main() {
    afl::fuzz!(|data: &[u8]| fuzz::agent_body(data));
}
