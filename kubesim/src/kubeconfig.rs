//! The kubeconfig kubesim writes for clients.

/// A kubeconfig pointing at `server` with no credentials, default namespace `default`.
///
/// kube-rs, the Python client and fabric8 (Spark) all accept a user entry with no fields.
pub fn render(server: &str) -> String {
    render_with_token(server, None)
}

/// A kubeconfig pointing at `server`, authenticating with `token` as a bearer token when given
/// (kube-rs, the Python client and fabric8 all read `user: {token: ...}`).
pub fn render_with_token(server: &str, token: Option<&str>) -> String {
    let user = match token {
        // A JSON string is a valid YAML double-quoted scalar, so any token survives quoting.
        Some(t) => format!("{{token: {}}}", serde_json::Value::from(t)),
        None => "{}".to_string(),
    };
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kubesim
  cluster:
    server: {server}
contexts:
- name: kubesim
  context:
    cluster: kubesim
    user: kubesim
    namespace: default
current-context: kubesim
preferences: {{}}
users:
- name: kubesim
  user: {user}
"
    )
}

/// How a kubeconfig user authenticates over HTTPS.
#[derive(Debug, Clone, Copy)]
pub enum Credentials<'a> {
    /// A client certificate and its key, both PEM (the admin).
    ClientCertificate {
        /// The certificate.
        cert: &'a str,
        /// Its key.
        key: &'a str,
    },
    /// A bearer token (a service-account token).
    Token(&'a str),
    /// None: requests are `system:anonymous` (a pod whose token is not mounted).
    Anonymous,
}

/// A kubeconfig for an HTTPS `server` whose certificate `ca_pem` signed, authenticating with
/// `credentials`; default namespace `namespace`. Certificates travel inline as
/// `certificate-authority-data` and `client-certificate-data`/`client-key-data` (base64 of
/// the PEM), as `kubeadm` writes them.
pub fn render_https(
    server: &str,
    ca_pem: &str,
    credentials: Credentials<'_>,
    namespace: &str,
) -> String {
    let b64 = |s: &str| crate::base64::encode(s.as_bytes());
    let user = match credentials {
        Credentials::ClientCertificate { cert, key } => format!(
            "\n    client-certificate-data: {}\n    client-key-data: {}",
            b64(cert),
            b64(key)
        ),
        // A JSON string is a valid YAML double-quoted scalar, so any token survives quoting.
        Credentials::Token(t) => format!("\n    token: {}", serde_json::Value::from(t)),
        Credentials::Anonymous => " {}".to_string(),
    };
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kubesim
  cluster:
    server: {server}
    certificate-authority-data: {ca}
contexts:
- name: kubesim
  context:
    cluster: kubesim
    user: kubesim
    namespace: {namespace}
current-context: kubesim
preferences: {{}}
users:
- name: kubesim
  user:{user}
",
        ca = b64(ca_pem),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubeconfig_is_valid_yaml_naming_the_server() {
        let text = super::render("http://127.0.0.1:1234");
        let v: serde_json::Value = yaml_serde::from_str(&text).expect("yaml");
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:1234"
        );
        assert_eq!(v["current-context"], "kubesim");
        assert_eq!(v["users"][0]["user"], serde_json::json!({}));
    }

    #[test]
    fn https_kubeconfig_carries_the_ca_and_the_credentials() {
        let text = super::render_https(
            "https://127.0.0.1:1234",
            "CA PEM",
            super::Credentials::ClientCertificate {
                cert: "CERT",
                key: "KEY",
            },
            "default",
        );
        let v: serde_json::Value = yaml_serde::from_str(&text).expect("yaml");
        let b64 = |s: &str| crate::base64::encode(s.as_bytes());
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority-data"],
            b64("CA PEM")
        );
        assert_eq!(
            v["users"][0]["user"]["client-certificate-data"],
            b64("CERT")
        );
        assert_eq!(v["users"][0]["user"]["client-key-data"], b64("KEY"));
        let text = super::render_https("https://h", "CA", super::Credentials::Token("a.b.c"), "ns");
        let v: serde_json::Value = yaml_serde::from_str(&text).expect("yaml");
        assert_eq!(v["users"][0]["user"]["token"], "a.b.c");
        assert_eq!(v["contexts"][0]["context"]["namespace"], "ns");
        let text = super::render_https("https://h", "CA", super::Credentials::Anonymous, "ns");
        let v: serde_json::Value = yaml_serde::from_str(&text).expect("yaml");
        assert_eq!(v["users"][0]["user"], serde_json::json!({}));
    }

    #[test]
    fn kubeconfig_with_token_carries_it_verbatim() {
        let token = "kubesim-node/n: 1#x/default/p";
        let text = super::render_with_token("http://127.0.0.1:1234", Some(token));
        let v: serde_json::Value = yaml_serde::from_str(&text).expect("yaml");
        assert_eq!(v["users"][0]["user"]["token"], token);
    }
}
