//! TLS for link listeners (`wss://`) and dialled links, with rustls on the `ring` provider: aws-lc-rs, the
//! default, needs cmake and a C toolchain that these machines and CI do not have.
//!
//! Certificates and keys are read from PEM files. Every error names the file and what is wrong with it, so
//! a bridge can prefix the flag that gave the path and fail at start-up rather than at the first connection.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use rustls::{ClientConfig, ServerConfig};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the certificate file {path}: {reason}")]
    Cert { path: PathBuf, reason: String },
    #[error("the certificate file {path} holds no PEM certificate (BEGIN CERTIFICATE)")]
    NoCert { path: PathBuf },
    #[error("cannot read the private key file {path}: {reason}")]
    Key { path: PathBuf, reason: String },
    #[error(
        "the private key file {path} holds no PEM private key (BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)"
    )]
    NoKey { path: PathBuf },
    #[error("the certificate {cert} and the key {key} do not go together: {reason}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("cannot use the CA certificates of {path}: {reason}")]
    Ca { path: PathBuf, reason: String },
    #[error("TLS setup failed: {0}")]
    Setup(String),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_error(e: pem::Error) -> String {
    match e {
        pem::Error::Io(io) => io.to_string(),
        other => format!("not valid PEM ({other:?})"),
    }
}

/// Every certificate in a PEM file, in order; at least one.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let cert_err = |e| TlsError::Cert {
        path: path.to_owned(),
        reason: read_error(e),
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(cert_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(cert_err)?;
    if certs.is_empty() {
        return Err(TlsError::NoCert {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The server side: the certificate chain in `cert` (leaf first) and its private key in `key`. The key must
/// match the leaf. Offers HTTP/1.1 by ALPN, the protocol WebSocket upgrades need.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = load_certs(cert)?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoKey {
            path: key.to_owned(),
        },
        other => TlsError::Key {
            path: key.to_owned(),
            reason: read_error(other),
        },
    })?;
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, private)
        .map_err(|e| TlsError::Mismatch {
            cert: cert.to_owned(),
            key: key.to_owned(),
            reason: e.to_string(),
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The client side: the public web roots, plus the certificates of `extra_ca` (a private CA, or a
/// self-signed server certificate) when given.
pub fn client_config(extra_ca: Option<&Path>) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = extra_ca {
        let certs = load_certs(path).map_err(|e| match e {
            TlsError::Cert { path, reason } => TlsError::Ca { path, reason },
            TlsError::NoCert { path } => TlsError::Ca {
                path,
                reason: "no PEM certificate (BEGIN CERTIFICATE) in it".to_owned(),
            },
            other => other,
        })?;
        for cert in certs {
            roots.add(cert).map_err(|e| TlsError::Ca {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        }
    }
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The client side for a link to a listener of this same process (an embedded relay on loopback): the
/// server must present exactly `cert`, whatever names it carries or whoever signed it. Pinning the very
/// certificate is stricter than trusting its CA, and works for certificates made for another host name.
pub fn client_config_pinned(cert: CertificateDer<'static>) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider();
    let verifier = Pinned {
        cert,
        algorithms: provider.signature_verification_algorithms,
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Setup(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

#[derive(Debug)]
struct Pinned {
    cert: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.cert.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer,
            ))
        }
    }

    // The handshake signatures are still checked: they prove the server holds the pinned certificate's key.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
