use std::path::Path;

use super::*;

/// A key pair written into `dir` as NAME.key and NAME.pub: (private, public).
fn keypair(dir: &Path, name: &str) -> (PrivateKey, PublicKey) {
    let (private, public) = PrivateKey::generate().unwrap();
    std::fs::write(dir.join(format!("{name}.key")), private).unwrap();
    std::fs::write(dir.join(format!("{name}.pub")), public).unwrap();
    (
        PrivateKey::read(&dir.join(format!("{name}.key"))).unwrap(),
        PublicKey::read(name, &dir.join(format!("{name}.pub"))).unwrap(),
    )
}

/// A signed component verifies under its key and is refused, each time with its reason, when
/// unsigned, signed by another key, signed for other bytes, or with an altered signature.
#[test]
fn each_refusal_has_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (team, team_pub) = keypair(dir.path(), "team");
    let (_, other_pub) = keypair(dir.path(), "other");
    let wasm = dir.path().join("tool.wasm");
    std::fs::write(&wasm, b"component bytes").unwrap();
    let keys = [other_pub.clone(), team_pub.clone()];

    assert_eq!(
        verify(&wasm, &Sha256Digest::of(b"component bytes"), &keys),
        Err(Refusal::Unsigned {
            expected: dir.path().join("tool.wasm.sig")
        })
    );
    let envelope = team.sign(b"component bytes").unwrap();
    assert_eq!(envelope.key, team_pub.fingerprint);
    envelope.write_beside(&wasm).unwrap();
    assert_eq!(
        verify(&wasm, &Sha256Digest::of(b"component bytes"), &keys),
        Ok("team".into())
    );

    let e = verify(&wasm, &Sha256Digest::of(b"component bytes"), &[other_pub]).unwrap_err();
    assert_eq!(
        e,
        Refusal::UnknownKey {
            key: team_pub.fingerprint.clone()
        }
    );
    assert!(
        e.to_string().contains("which [trust] does not trust"),
        "{e}"
    );

    let e = verify(&wasm, &Sha256Digest::of(b"other bytes"), &keys).unwrap_err();
    assert!(matches!(e, Refusal::OtherDigest { .. }), "{e}");
    assert!(
        e.to_string().contains("signature is for other bytes"),
        "{e}"
    );

    // A signature over other bytes, put in an envelope that claims these.
    let mut forged = team.sign(b"other bytes").unwrap();
    forged.digest = Sha256Digest::of(b"component bytes");
    forged.write_beside(&wasm).unwrap();
    let e = verify(&wasm, &Sha256Digest::of(b"component bytes"), &keys).unwrap_err();
    assert_eq!(e, Refusal::Invalid { key: "team".into() });
    assert_eq!(
        e.to_string(),
        "its signature does not verify under key `team`"
    );

    std::fs::write(signature_path(&wasm), "not json").unwrap();
    let e = verify(&wasm, &Sha256Digest::of(b"component bytes"), &keys).unwrap_err();
    assert!(matches!(e, Refusal::Unreadable { .. }), "{e}");
    std::fs::write(signature_path(&wasm), vec![b' '; 20_000]).unwrap();
    let e = verify(&wasm, &Sha256Digest::of(b"component bytes"), &keys).unwrap_err();
    assert!(e.to_string().contains("larger than 16384 bytes"), "{e}");
}

/// Keys of the wrong kind or in the wrong file are refused, naming the file and the fix.
#[test]
fn wrong_keys_are_named() {
    let dir = tempfile::tempdir().unwrap();
    keypair(dir.path(), "k");
    let e = PublicKey::read("k", &dir.path().join("k.key")).unwrap_err();
    assert!(e.to_string().contains("give the .pub file"), "{e}");
    let e = PrivateKey::read(&dir.path().join("k.pub")).unwrap_err();
    assert!(e.to_string().contains("PUBLIC KEY"), "{e}");
    let garbage = dir.path().join("g.pub");
    std::fs::write(
        &garbage,
        "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
    )
    .unwrap();
    let e = PublicKey::read("g", &garbage).unwrap_err();
    assert!(e.to_string().contains("not an ECDSA P-256 key"), "{e}");
    assert!(
        format!("{:?}", PrivateKey::read(&dir.path().join("k.key")).unwrap()).contains("redacted")
    );
}

/// A public key's fingerprint is the SHA-256 of its SubjectPublicKeyInfo, the same however
/// the PEM is wrapped.
#[test]
fn a_fingerprint_is_over_the_key_info() {
    let dir = tempfile::tempdir().unwrap();
    let (_, public) = PrivateKey::generate().unwrap();
    let der = pem::parse(&public).unwrap().into_contents();
    assert_eq!(der.len(), 91);
    let k = PublicKey::from_pem("k", public.as_bytes()).unwrap();
    assert_eq!(k.fingerprint, Sha256Digest::of(&der));
    let rewrapped = pem::encode_config(
        &pem::Pem::new("PUBLIC KEY", der),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    );
    let again = PublicKey::from_pem("k", rewrapped.as_bytes()).unwrap();
    assert_eq!(again.fingerprint, k.fingerprint);
    drop(dir);
}
