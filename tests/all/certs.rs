//! Certificates made at test time (rcgen): a CA of the test's own and a server certificate it
//! signed for 127.0.0.1, as a company CA and an internal server's certificate would be.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

pub struct LoopbackCerts {
    /// The CA's certificate, PEM: what a client is told to trust.
    pub ca_pem: String,
    /// The server's certificate (for 127.0.0.1), PEM and DER.
    pub cert_pem: String,
    pub cert_der: Vec<u8>,
    /// The server's private key, PEM and PKCS#8 DER.
    pub key_pem: String,
    pub key_der: Vec<u8>,
}

/// A fresh CA and a server certificate for 127.0.0.1 signed by it.
pub fn loopback() -> LoopbackCerts {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "toolhost test corporate CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    LoopbackCerts {
        ca_pem,
        cert_pem: cert.pem(),
        cert_der: cert.der().to_vec(),
        key_pem: key.serialize_pem(),
        key_der: key.serialize_der(),
    }
}
