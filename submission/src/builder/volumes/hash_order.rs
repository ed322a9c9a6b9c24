//! The order in which Scala's immutable `Map`/`Set` iterate, which is the order Spark gives
//! volumes, their `-pvc-N` claim indices and the pod's volume list. Spark 4.x is built with
//! Scala 2.13, Spark 3.5 with Scala 2.12, whose collections differ (see [`Scala`]).
//!
//! Up to four elements, `Map1`..`Map4` and `Set1`..`Set4` keep insertion order (both Scalas).
//! From the fifth on, the builders switch to a hash trie (`HashMap`/`HashSet`):
//! * 2.13's CHAMP trie visits a node's own elements first (in order of their 5-bit hash slice),
//!   then its sub-nodes (in slice order), depth first;
//! * 2.12's `HashTrieMap`/`HashTrieSet` keeps elements and sub-tries in one array by slice, so
//!   its order is that of the slices read from the lowest five bits up.
//!
//! Where an element lands depends only on `improve(element.##)`, so the order is a function of
//! the hashes; elements whose 32-bit hashes are equal share a collision node and keep insertion
//! order.
//!
//! Before that, `SparkConf.getAll` lists the settings through a `scala.collection.mutable.HashSet`
//! of `(key, value)` tuples; that order only shows when at most four volume keys are set (a
//! `Map1`..`Map4` keeps it), see [`get_all_order`].
//!
//! The hashes are Scala's own: `String.hashCode` for strings, `MurmurHash3.productHash` for case
//! classes, tuples and `Some`, `MurmurHash3.mapHash` for maps (read from scala-library 2.13.18,
//! the one Spark 4.3 ships, and 2.12.18, Spark 3.5.9's).

/// The Scala a Spark release is built with: its collections and case-class hashes differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scala {
    /// Spark 3.5.
    V2_12,
    /// Spark 4.0 and later.
    V2_13,
}

/// `scala.collection.immutable.Map`/`Set` builders switch to a hash trie above this size.
const ORDERED_UP_TO: usize = 4;
/// `Node.BitPartitionSize`: bits of the hash used per trie level.
const BITS_PER_LEVEL: u32 = 5;
/// `Node.HashCodeLength`: below this many bits of shift, elements still differ by hash.
const HASH_BITS: u32 = 32;

const PRODUCT_SEED: i32 = 0xcafe_babe_u32 as i32;

/// Java's `String.hashCode`: `s[0]*31^(n-1) + … + s[n-1]` over UTF-16 code units, wrapping.
pub(crate) fn string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// `MurmurHash3.mix`.
fn mix(hash: i32, data: i32) -> i32 {
    mix_last(hash, data)
        .rotate_left(13)
        .wrapping_mul(5)
        .wrapping_add(0xe654_6b64_u32 as i32)
}

/// `MurmurHash3.mixLast`.
fn mix_last(hash: i32, data: i32) -> i32 {
    let k = data
        .wrapping_mul(0xcc9e_2d51_u32 as i32)
        .rotate_left(15)
        .wrapping_mul(0x1b87_3593);
    hash ^ k
}

/// `MurmurHash3.finalizeHash`: the length mixed in, then the avalanche.
fn finalize_hash(hash: i32, length: i32) -> i32 {
    let mut h = (hash ^ length) as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h as i32
}

/// The `hashCode` of a case class (or tuple, or `Some`) named `prefix` whose fields hash to
/// `fields`: `MurmurHash3.productHash`. Scala 2.13 mixes the prefix into the product seed (the
/// compiler folds `mix(productSeed, prefix.hashCode)` into a constant, which the tests check);
/// 2.12 starts from the bare product seed.
pub(crate) fn product_hash(scala: Scala, prefix: &str, fields: &[i32]) -> i32 {
    let seed = match scala {
        Scala::V2_13 => mix(PRODUCT_SEED, string_hash(prefix)),
        Scala::V2_12 => PRODUCT_SEED,
    };
    let h = fields.iter().fold(seed, |h, &field| mix(h, field));
    // A product has at most 22 fields.
    finalize_hash(h, fields.len() as i32)
}

/// `(a, b).##` of two strings: a `Tuple2` is a two-field case class.
pub(crate) fn string_pair_hash(scala: Scala, a: &str, b: &str) -> i32 {
    product_hash(scala, "Tuple2", &[string_hash(a), string_hash(b)])
}

/// `Option[A].##`: `None` is a case object (its name's hash), `Some` a one-field case class.
pub(crate) fn option_hash(scala: Scala, value: Option<i32>) -> i32 {
    match value {
        None => string_hash("None"),
        Some(h) => product_hash(scala, "Some", &[h]),
    }
}

/// `Option[String].##`.
pub(crate) fn option_string_hash(scala: Scala, value: Option<&str>) -> i32 {
    option_hash(scala, value.map(string_hash))
}

/// `Boolean.##` (Java's `Boolean.hashCode`).
pub(crate) fn bool_hash(value: bool) -> i32 {
    if value { 1231 } else { 1237 }
}

/// Scala 2.13's `MurmurHash3.mapHash` of a `Map[String, String]`: an order-independent sum, xor
/// and product of each entry's `tuple2Hash`. (Only Spark 4.x hashes maps: the claim labels and
/// annotations they belong to came with 4.0.)
pub(crate) fn string_map_hash<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> i32 {
    let (mut a, mut b, mut c, mut n) = (0i32, 0i32, 1i32, 0i32);
    for (key, value) in entries {
        let h = string_pair_hash(Scala::V2_13, key, value);
        a = a.wrapping_add(h);
        b ^= h;
        c = c.wrapping_mul(h | 1);
        n = n.wrapping_add(1);
    }
    let h = mix_last(mix(mix(string_hash("Map"), a), b), c);
    finalize_hash(h, n)
}

/// `scala.collection.Hashing.improve`: what the hash trie indexes by.
fn improve(hash: i32) -> u32 {
    let mut h = hash.wrapping_add(!(hash << 9)) as u32;
    h ^= h >> 14;
    h = h.wrapping_add(h << 4);
    h ^ (h >> 10)
}

/// The order in which `SparkConf.getAll` lists `entries` (the whole conf, in the order the
/// settings were made): a permutation of `0..entries.len()`. It lists
/// `settings.entrySet().asScala.map(e => (e.getKey, e.getValue))`: the `ConcurrentHashMap`'s
/// entries collected into a `mutable.HashSet` of tuples, which each Scala iterates its own way.
pub(crate) fn get_all_order(scala: Scala, entries: &[(String, String)]) -> Vec<usize> {
    let hashes: Vec<i32> = entries
        .iter()
        .map(|(k, v)| string_pair_hash(scala, k, v))
        .collect();
    match scala {
        Scala::V2_13 => mutable_set_order(&hashes, hashes.len()),
        Scala::V2_12 => {
            let inserted = concurrent_hash_map_order(entries);
            let in_map_order: Vec<i32> = inserted.iter().map(|&i| hashes[i]).collect();
            flat_hash_table_order(&in_map_order)
                .into_iter()
                .map(|j| inserted[j])
                .collect()
        }
    }
}

/// `mutable.HashSet`'s default capacity and load factor (16, 0.75).
const MUTABLE_INITIAL_BUCKETS: usize = 16;

/// The iteration order, among themselves, of some elements of a Scala 2.13
/// `scala.collection.mutable.HashSet` that holds `set_size` elements in all: a permutation of
/// `0..hashes.len()`.
///
/// That set spreads `h ^ (h >>> 16)` of each `##` over a table of buckets, keeps each bucket
/// sorted by that value (as a signed int), and doubles the table when an addition would reach
/// three quarters of it, so the table is the smallest power of two from 16 with `set_size` below
/// three quarters of it, whatever the insertion order. Equal hashes keep insertion order, which
/// here is the order given.
pub(crate) fn mutable_set_order(hashes: &[i32], set_size: usize) -> Vec<usize> {
    let mut buckets = MUTABLE_INITIAL_BUCKETS;
    while set_size + 1 > buckets / 4 * 3 {
        buckets *= 2;
    }
    let mask = (buckets - 1) as u32;
    let mut order: Vec<(u32, i32, usize)> = hashes
        .iter()
        .enumerate()
        .map(|(i, &h)| {
            let spread = (h as u32) ^ ((h as u32) >> 16);
            (spread & mask, spread as i32, i)
        })
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, _, i)| i).collect()
}

/// `java.util.concurrent.ConcurrentHashMap`'s default table size and resize threshold (16, 3/4).
const CONCURRENT_MAP_INITIAL_BINS: usize = 16;

/// The order in which a `ConcurrentHashMap` (SparkConf's `settings`) iterates keys put in this
/// order: by bin (`spread(key.hashCode)` masked to the table, which doubles when the count
/// reaches three quarters of it), and within a bin by insertion. (A resize can reverse part of a
/// bin, and SparkSubmit's real insertion order is not ours; either only matters through the
/// probing of [`flat_hash_table_order`], so this is the model's one approximation.)
fn concurrent_hash_map_order(entries: &[(String, String)]) -> Vec<usize> {
    let mut bins = CONCURRENT_MAP_INITIAL_BINS;
    while entries.len() >= bins / 4 * 3 {
        bins *= 2;
    }
    let mask = (bins - 1) as u32;
    let mut order: Vec<(u32, usize)> = entries
        .iter()
        .enumerate()
        .map(|(i, (key, _))| {
            let h = string_hash(key) as u32;
            (((h ^ (h >> 16)) & 0x7fff_ffff) & mask, i)
        })
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, i)| i).collect()
}

/// Scala 2.12's `FlatHashTable` (behind `mutable.HashSet`): 32 slots to start, open addressing
/// with linear probing, doubled (and every element re-added in slot order) when the count
/// reaches 0.45 of the slots.
const FLAT_INITIAL_SLOTS: usize = 32;
const FLAT_LOAD_FACTOR_PER_MILLE: usize = 450;

/// The iteration order (slot order) of a Scala 2.12 `mutable.HashSet` to which distinct elements
/// with these hashes were added in this order: a permutation of `0..hashes.len()`.
fn flat_hash_table_order(hashes: &[i32]) -> Vec<usize> {
    fn slot(hash: i32, slots: usize) -> usize {
        // `index(hcode)`: byteswap32, rotated right by the table's seed (the bit count of
        // `slots - 1`), then the top bits.
        let bits = (slots - 1).count_ones();
        let swapped = (hash.wrapping_mul(0x9e37_75cd_u32 as i32))
            .swap_bytes()
            .wrapping_mul(0x9e37_75cd_u32 as i32) as u32;
        let rotated = swapped.rotate_right(bits % 32);
        ((rotated >> (32 - bits)) as usize) & (slots - 1)
    }
    fn insert(table: &mut [Option<usize>], hashes: &[i32], element: usize) {
        let slots = table.len();
        let mut at = slot(hashes[element], slots);
        while table[at].is_some() {
            at = (at + 1) % slots;
        }
        table[at] = Some(element);
    }
    let mut table: Vec<Option<usize>> = vec![None; FLAT_INITIAL_SLOTS];
    for (count, element) in (0..hashes.len()).enumerate() {
        insert(&mut table, hashes, element);
        if count + 1 >= table.len() * FLAT_LOAD_FACTOR_PER_MILLE / 1000 {
            let doubled = vec![None; table.len() * 2];
            let old = std::mem::replace(&mut table, doubled);
            for e in old.into_iter().flatten() {
                insert(&mut table, hashes, e);
            }
        }
    }
    table.into_iter().flatten().collect()
}

/// The iteration order of an immutable `Set` (or a `Map`'s keys) built by adding elements with
/// these `##` hashes in this order: a permutation of `0..hashes.len()`. The elements must be
/// distinct (a builder keeps the first of equal elements).
pub(crate) fn immutable_order(scala: Scala, hashes: &[i32]) -> Vec<usize> {
    if hashes.len() <= ORDERED_UP_TO {
        return (0..hashes.len()).collect();
    }
    let items: Vec<(u32, usize)> = hashes
        .iter()
        .enumerate()
        .map(|(i, &h)| (improve(h), i))
        .collect();
    match scala {
        Scala::V2_13 => {
            let mut order = Vec::with_capacity(items.len());
            trie_order(items, 0, &mut order);
            order
        }
        Scala::V2_12 => hash_trie_order(items),
    }
}

/// Scala 2.12's `HashTrieMap`/`HashTrieSet`: each level holds elements and sub-tries together,
/// ordered by the level's 5-bit slice, so the order is lexicographic in the slices from the
/// lowest bits up; equal hashes (a collision node) keep insertion order.
fn hash_trie_order(mut items: Vec<(u32, usize)>) -> Vec<usize> {
    let slices = |hash: u32| -> [u32; 7] {
        std::array::from_fn(|level| (hash >> (BITS_PER_LEVEL * level as u32)) & 31)
    };
    items.sort_by_key(|&(hash, i)| (slices(hash), i));
    items.into_iter().map(|(_, i)| i).collect()
}

/// Appends the pre-order of the trie node holding `items` at `shift`: the slices that only one
/// item occupies are this node's payload and come first, in slice order; the shared slices are
/// sub-nodes, visited after, in slice order.
fn trie_order(mut items: Vec<(u32, usize)>, shift: u32, out: &mut Vec<usize>) {
    if shift >= HASH_BITS {
        // A collision node: equal hashes, kept in insertion order.
        items.sort_by_key(|&(_, i)| i);
        out.extend(items.into_iter().map(|(_, i)| i));
        return;
    }
    let slice = |hash: u32| (hash >> shift) & ((1 << BITS_PER_LEVEL) - 1);
    // Stable: within one slice the insertion order is kept for the collision case.
    items.sort_by_key(|&(hash, _)| slice(hash));
    let groups: Vec<Vec<(u32, usize)>> = items
        .chunk_by(|a, b| slice(a.0) == slice(b.0))
        .map(<[_]>::to_vec)
        .collect();
    let (payload, nodes): (Vec<_>, Vec<_>) = groups.into_iter().partition(|g| g.len() == 1);
    out.extend(payload.into_iter().flatten().map(|(_, i)| i));
    for node in nodes {
        trie_order(node, shift + BITS_PER_LEVEL, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_hash_is_javas() {
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("None"), 2_433_880);
        assert_eq!(string_hash("hello"), 99_162_322);
        // Beyond the BMP a char is two UTF-16 units, as in Java.
        assert_eq!(string_hash("日本"), 0x65e5 * 31 + 0x672c);
        assert_eq!(string_hash("😀"), 0xd83d * 31 + 0xde00);
    }

    /// The seeds scalac folds into each `hashCode` (read from the bytecode of Spark 4.3.0 and
    /// scala-library 2.13.18) are `mix(productSeed, prefix.hashCode)`.
    #[test]
    fn product_seeds_match_the_compiled_hash_codes() {
        let folded = |prefix: &str| mix(PRODUCT_SEED, string_hash(prefix));
        // Scala 2.12 (Spark 3.5) starts every product from the bare seed, -889275714.
        assert_eq!(PRODUCT_SEED, -889_275_714);
        assert_eq!(folded("Some"), 1_323_286_827);
        assert_eq!(folded("Tuple2"), -116_390_334);
        assert_eq!(folded("KubernetesHostPathVolumeConf"), -340_119_557);
        assert_eq!(folded("KubernetesPVCVolumeConf"), 875_937_562);
        assert_eq!(folded("KubernetesEmptyDirVolumeConf"), 499_228_991);
        assert_eq!(folded("KubernetesNFSVolumeConf"), -1_261_693_473);
        // KubernetesVolumeSpec's hashCode mixes the prefix hash itself.
        assert_eq!(string_hash("KubernetesVolumeSpec"), 861_614_587);
    }

    #[test]
    fn small_collections_keep_insertion_order() {
        assert_eq!(immutable_order(Scala::V2_13, &[]), Vec::<usize>::new());
        assert_eq!(
            immutable_order(Scala::V2_13, &[9, 3, 7, 1]),
            vec![0, 1, 2, 3]
        );
    }

    #[test]
    fn five_or_more_follow_the_hash_trie() {
        // Five distinct slices at the root: payload in slice order. improve() scrambles, so
        // pick hashes by their improved slice.
        let by_slice = |want: u32| {
            (0..i32::MAX)
                .find(|&h| improve(h) & 31 == want)
                .expect("every slice is reachable")
        };
        let hashes = [
            by_slice(7),
            by_slice(2),
            by_slice(30),
            by_slice(0),
            by_slice(15),
        ];
        assert_eq!(immutable_order(Scala::V2_13, &hashes), vec![3, 1, 0, 4, 2]);
        // Scala 2.12 orders the same five by slice too: they all sit at the root.
        assert_eq!(immutable_order(Scala::V2_12, &hashes), vec![3, 1, 0, 4, 2]);
    }

    #[test]
    fn shared_slices_come_after_the_nodes_own_elements() {
        // Two hashes share root slice 0 and go one level down; three others sit at the root.
        let with = |root: u32, next: u32| {
            (0..i32::MAX)
                .find(|&h| improve(h) & 31 == root && (improve(h) >> 5) & 31 == next)
                .expect("reachable")
        };
        let hashes = [with(0, 4), with(5, 0), with(0, 1), with(31, 0), with(1, 0)];
        assert_eq!(immutable_order(Scala::V2_13, &hashes), vec![4, 1, 3, 2, 0]);
        // Scala 2.12 keeps a sub-trie at its slice's place: slice 0's pair comes first.
        assert_eq!(immutable_order(Scala::V2_12, &hashes), vec![2, 0, 4, 1, 3]);
    }

    #[test]
    fn a_mutable_set_iterates_by_bucket_then_by_hash() {
        // Spread values 0x11 and 0x21 share bucket 1 of 16 but not of 32; 0x05 is bucket 5.
        let hashes = [0x21, 0x05, 0x11];
        assert_eq!(mutable_set_order(&hashes, 11), vec![2, 0, 1]);
        // With 12 elements in all the table has 32 buckets: 0x11 (17) comes after 0x05.
        assert_eq!(mutable_set_order(&hashes, 12), vec![0, 1, 2]);
        // Negative spread values sort first within a bucket, as signed ints.
        // 0x8000_0000 spreads to 0x8000_8000: bucket 0, like 0x10.
        let negative = [0x10, 0x8000_0000_u32 as i32];
        assert_eq!(mutable_set_order(&negative, 4), vec![1, 0]);
    }

    #[test]
    fn equal_hashes_keep_insertion_order() {
        for scala in [Scala::V2_12, Scala::V2_13] {
            assert_eq!(
                immutable_order(scala, &[5, 5, 5, 5, 5]),
                vec![0, 1, 2, 3, 4]
            );
        }
    }

    /// Values from the JVM: `MurmurHash3.emptyMapHash` and `Map("tier" -> "hot", "team" ->
    /// "data").hashCode`.
    #[test]
    fn map_hash_is_scalas_and_ignores_entry_order() {
        assert_eq!(string_map_hash([]), -1_609_326_920);
        assert_eq!(
            string_map_hash([("tier", "hot"), ("team", "data")]),
            457_495_031
        );
        assert_eq!(
            string_map_hash([("team", "data"), ("tier", "hot")]),
            457_495_031
        );
    }
}
