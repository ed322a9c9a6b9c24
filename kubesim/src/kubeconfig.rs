//! The kubeconfig kubesim writes for clients.

/// A kubeconfig pointing at `server` with no credentials, default namespace `default`.
///
/// kube-rs, the Python client and fabric8 (Spark) all accept a user entry with no fields.
pub fn render(server: &str) -> String {
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
  user: {{}}
"
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubeconfig_is_valid_yaml_naming_the_server() {
        let text = super::render("http://127.0.0.1:1234");
        let v: serde_json::Value = serde_yaml::from_str(&text).expect("yaml");
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:1234"
        );
        assert_eq!(v["current-context"], "kubesim");
    }
}
