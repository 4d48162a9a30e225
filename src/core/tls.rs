//! TLS material for `rediss://` nodes, checked when the client is built.

use crate::core::error::{LockError, Result};

/// TLS material for `rediss://` nodes, PEM-encoded. Without a CA the system's
/// trust store is used.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct TlsConfig {
    pub ca: Option<Vec<u8>>,
    pub cert: Option<Vec<u8>>,
    pub key: Option<Vec<u8>>,
}

impl TlsConfig {
    /// Checks that the material is PEM (no I/O), so that a wrong file fails
    /// when the client is built rather than at its first acquire. Never echoes
    /// the material.
    pub fn validate(&self) -> Result<()> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        for (name, pem) in [("tls.ca", &self.ca), ("tls.cert", &self.cert)] {
            let Some(pem) = pem else { continue };
            let certs: Vec<_> = CertificateDer::pem_slice_iter(pem).collect();
            if certs.is_empty() || certs.iter().any(std::result::Result::is_err) {
                return Err(LockError::invalid_value(
                    name,
                    "is not PEM-encoded certificates (-----BEGIN CERTIFICATE----- blocks)",
                ));
            }
        }
        if let Some(key) = &self.key {
            if PrivateKeyDer::from_pem_slice(key).is_err() {
                return Err(LockError::invalid_value(
                    "tls.key",
                    "is not a PEM-encoded private key (a -----BEGIN ... PRIVATE KEY----- block)",
                ));
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_struct("TlsConfig")
            .field("ca", &self.ca.is_some())
            .field("cert", &self.cert.is_some())
            .field("key", &self.key.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::config::ClientConfig;
    use crate::core::error::ErrorCode;

    #[test]
    fn tls_material_must_be_pem() {
        const CERT: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        const KEY: &[u8] = b"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";
        let tls = |ca: &[u8], cert: &[u8], key: &[u8]| TlsConfig {
            ca: Some(ca.to_vec()),
            cert: Some(cert.to_vec()),
            key: Some(key.to_vec()),
        };
        assert!(tls(CERT, CERT, KEY).validate().is_ok());
        for (bad, name) in [
            (tls(b"secret-not-pem", CERT, KEY), "tls.ca"),
            (tls(b"", CERT, KEY), "tls.ca"),
            (tls(CERT, b"secret-not-pem", KEY), "tls.cert"),
            (tls(CERT, KEY, KEY), "tls.cert"),
            (tls(CERT, CERT, b"secret-not-pem"), "tls.key"),
            (tls(CERT, CERT, CERT), "tls.key"),
        ] {
            let err = bad.validate().expect_err(name);
            assert_eq!(err.code, ErrorCode::InvalidArgValue, "{name}");
            assert!(err.message.contains(name), "{}", err.message);
            assert!(!err.message.contains("secret"), "{}", err.message);
        }
        let cfg = ClientConfig {
            tls: Some(tls(b"not pem", CERT, KEY)),
            ..ClientConfig::default()
        };
        assert_eq!(
            cfg.validate().expect_err("checked with the config").code,
            ErrorCode::InvalidArgValue
        );
    }
}
