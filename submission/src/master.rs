use thiserror::Error;

use crate::resource::uri_scheme;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KubernetesMasterError {
    #[error("Kubernetes master URL must start with k8s://")]
    MissingPrefix,
    #[error("Kubernetes master URL is not a valid URI")]
    InvalidUri,
    #[error("Kubernetes master scheme must be http or https")]
    InvalidScheme,
}

impl KubernetesMasterError {
    pub fn kind(&self) -> &'static str {
        match self {
            KubernetesMasterError::MissingPrefix => "missing_prefix",
            KubernetesMasterError::InvalidUri => "invalid_uri",
            KubernetesMasterError::InvalidScheme => "invalid_scheme",
        }
    }
}

/// `spark.master` as `Utils.checkAndGetK8sMasterUrl` rewrites it: `k8s://host:port` means
/// https, an explicit http or https scheme (any case) is kept as written.
pub fn kubernetes_master_url(raw: &str) -> Result<String, KubernetesMasterError> {
    let rest = raw
        .strip_prefix("k8s://")
        .ok_or(KubernetesMasterError::MissingPrefix)?;
    if !rest.contains("://") {
        return Ok(format!("k8s://https://{rest}"));
    }
    match uri_scheme(rest) {
        Err(()) => Err(KubernetesMasterError::InvalidUri),
        Ok(Some(scheme))
            if scheme.eq_ignore_ascii_case("https") || scheme.eq_ignore_ascii_case("http") =>
        {
            Ok(raw.to_owned())
        }
        Ok(_) => Err(KubernetesMasterError::InvalidScheme),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_urls_are_normalised_like_spark() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            ("k8s://https://h:6443", Ok("k8s://https://h:6443")),
            (
                "k8s://http://127.0.0.1:8080",
                Ok("k8s://http://127.0.0.1:8080"),
            ),
            ("k8s://HTTPS://h", Ok("k8s://HTTPS://h")),
            ("k8s://127.0.0.1:6443", Ok("k8s://https://127.0.0.1:6443")),
            (
                "k8s://kubernetes.default.svc",
                Ok("k8s://https://kubernetes.default.svc"),
            ),
            ("k8s://ftp://h", Err("invalid_scheme")),
            ("k8s://a b://h", Err("invalid_uri")),
            ("k8s:/h", Err("missing_prefix")),
            ("K8S://h", Err("missing_prefix")),
            ("k8s", Err("missing_prefix")),
        ];
        for (raw, expected) in cases {
            let got = kubernetes_master_url(raw);
            match expected {
                Ok(url) => assert_eq!(got.as_deref(), Ok(*url), "{raw}"),
                Err(kind) => assert_eq!(got.map_err(|e| e.kind()), Err(*kind), "{raw}"),
            }
        }
    }
}
