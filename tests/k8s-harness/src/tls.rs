//! A throw-away CA, the apiserver's serving certificate, a service-account key and a token.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

pub(crate) struct Material {
    pub ca_cert: String,
    pub server_cert: String,
    pub server_key: String,
    pub sa_key: String,
    pub sa_pub: String,
    pub token: String,
}

pub(crate) fn generate() -> Result<Material, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "kusion-harness-ca");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let server_key = KeyPair::generate()?;
    let mut server =
        CertificateParams::new(vec!["localhost".to_string(), "kubernetes".to_string()])?;
    server
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    server
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server.signed_by(&server_key, &issuer)?;

    let sa_key = KeyPair::generate()?;
    // The token only has to be unguessable by other local users for the run's lifetime; a fresh
    // key's bytes are a convenient source of randomness without another dependency.
    let token: String = KeyPair::generate()?
        .serialize_der()
        .iter()
        .rev()
        .take(24)
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(Material {
        ca_cert: ca_cert.pem(),
        server_cert: server_cert.pem(),
        server_key: server_key.serialize_pem(),
        sa_key: sa_key.serialize_pem(),
        sa_pub: sa_key.public_key_pem(),
        token,
    })
}
