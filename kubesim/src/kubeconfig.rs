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
    fn kubeconfig_with_token_carries_it_verbatim() {
        let token = "kubesim-node/n: 1#x/default/p";
        let text = super::render_with_token("http://127.0.0.1:1234", Some(token));
        let v: serde_json::Value = yaml_serde::from_str(&text).expect("yaml");
        assert_eq!(v["users"][0]["user"]["token"], token);
    }
}
