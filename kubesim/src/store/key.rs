//! The store's map keys, (group, plural) and (namespace, name), looked up with borrowed
//! strings: reading an object builds no `String`.

/// A pair of strings, the shape of both of the store's keys, so that a look-up borrows its
/// strings instead of building two `String`s (four allocations per object read otherwise).
pub(super) trait StrPair {
    fn strs(&self) -> (&str, &str);
}

impl StrPair for (String, String) {
    fn strs(&self) -> (&str, &str) {
        (&self.0, &self.1)
    }
}

impl StrPair for (&str, &str) {
    fn strs(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl<'a> std::borrow::Borrow<dyn StrPair + 'a> for (String, String) {
    fn borrow(&self) -> &(dyn StrPair + 'a) {
        self
    }
}

// Ordered and hashed as the tuple of its strings, as `(String, String)` is: the borrowed and
// the owned form of a key must agree for the maps to find it.
impl PartialEq for dyn StrPair + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.strs() == other.strs()
    }
}

impl Eq for dyn StrPair + '_ {}

impl PartialOrd for dyn StrPair + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for dyn StrPair + '_ {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.strs().cmp(&other.strs())
    }
}

impl std::hash::Hash for dyn StrPair + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.strs().hash(state)
    }
}

/// A borrowed key for `objects` and its maps.
pub(super) fn key<'a>(pair: &'a (&'a str, &'a str)) -> &'a (dyn StrPair + 'a) {
    pair
}
