//! The bearer token a pod's processes present to the API server, naming the node they run on.
//!
//! Format: `kubesim-node/<node>/<namespace>/<pod>`. `/` separates the parts because Kubernetes
//! names never contain it, while node and pod names may contain dots; it is also a valid
//! character of an RFC 6750 bearer token, so every client sends the token unchanged.
//! kubesim only reads the node back; namespace and pod are there for people reading logs.

/// Every node token starts with this.
pub const PREFIX: &str = "kubesim-node/";

/// The token for processes of pod `namespace/pod` on `node`.
pub fn for_pod(node: &str, namespace: &str, pod: &str) -> String {
    format!("{PREFIX}{node}/{namespace}/{pod}")
}

/// The node named by an `Authorization` header value, if it carries a node token.
///
/// Runs on every API request, so it borrows from the header and stops at the node name.
pub fn node_of_authorization(value: &[u8]) -> Option<&str> {
    // The auth scheme is case-insensitive (RFC 9110 §11.1).
    let (scheme, rest) = value.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii_start().strip_prefix(PREFIX.as_bytes())?;
    let end = token.iter().position(|&b| b == b'/').unwrap_or(token.len());
    let node = std::str::from_utf8(&token[..end]).ok()?;
    (!node.is_empty()).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_token_names_its_node_even_with_dots_in_names() {
        let token = for_pod("node.example.com", "spark", "driver.v1");
        let header = format!("Bearer {token}");
        assert_eq!(
            node_of_authorization(header.as_bytes()),
            Some("node.example.com")
        );
    }

    #[test]
    fn the_scheme_is_case_insensitive() {
        assert_eq!(
            node_of_authorization(b"bearer kubesim-node/n1/default/p"),
            Some("n1")
        );
    }

    #[test]
    fn other_credentials_name_no_node() {
        for value in [
            &b""[..],
            b"Bearer",
            b"Bearer ",
            b"Bearer some-service-account-token",
            b"Basic a3ViZXNpbS1ub2RlL24xL2RlZmF1bHQvcA==",
            b"Bearer kubesim-node/",
            b"Bearer kubesim-node//default/p",
            b"Bearer kubesim-nodeX/n1/default/p",
        ] {
            assert_eq!(node_of_authorization(value), None, "{value:?}");
        }
    }
}
