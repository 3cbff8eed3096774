//! Serving certificates, the service-account key and the static token file.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::error::{Error, Result};

/// Files written by [`generate`], all inside one directory.
#[derive(Debug, Clone)]
pub(crate) struct Pki {
    pub(crate) ca_pem: String,
    pub(crate) ca_file: PathBuf,
    pub(crate) server_cert: PathBuf,
    pub(crate) server_key: PathBuf,
    pub(crate) sa_key: PathBuf,
    pub(crate) sa_pub: PathBuf,
    pub(crate) token_file: PathBuf,
    pub(crate) token: String,
}

/// Creates a CA, a serving cert for 127.0.0.1/localhost signed by it, an
/// ECDSA service-account signing key and a token file whose one token is in
/// `system:masters` (full access under RBAC).
pub(crate) fn generate(dir: &Path) -> Result<Pki> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "reconcile-k8s-env CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca_pem = ca_cert.pem();
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_owned(),
        "kubernetes".to_owned(),
        "kubernetes.default".to_owned(),
        "kubernetes.default.svc".to_owned(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    let server_cert = params.signed_by(&server_key, &issuer)?;

    let sa_key = KeyPair::generate()?;
    let token = random_token()?;

    let pki = Pki {
        ca_pem: ca_pem.clone(),
        ca_file: dir.join("ca.crt"),
        server_cert: dir.join("apiserver.crt"),
        server_key: dir.join("apiserver.key"),
        sa_key: dir.join("sa.key"),
        sa_pub: dir.join("sa.pub"),
        token_file: dir.join("tokens.csv"),
        token: token.clone(),
    };
    write(&pki.ca_file, &ca_pem)?;
    write(&pki.server_cert, &server_cert.pem())?;
    write(&pki.server_key, &server_key.serialize_pem())?;
    write(&pki.sa_key, &sa_key.serialize_pem())?;
    // The verifying side only parses public keys (or PKCS#1/SEC1 private
    // keys), not the PKCS#8 that rcgen writes.
    write(&pki.sa_pub, &sa_key.public_key_pem())?;
    // token,user,uid,"groups"
    write(
        &pki.token_file,
        &format!("{token},admin,admin,\"system:masters\"\n"),
    )?;
    Ok(pki)
}

fn write(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(Error::io(format!("writing {}", path.display())))
}

/// 32 hex characters from the kernel's random UUID source.
fn random_token() -> Result<String> {
    let mut token = String::new();
    for _ in 0..2 {
        let uuid = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
            .map_err(Error::io("reading /proc/sys/kernel/random/uuid"))?;
        token.extend(uuid.trim().chars().filter(char::is_ascii_hexdigit));
    }
    Ok(token)
}
