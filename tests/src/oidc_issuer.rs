//! An OIDC issuer for end-to-end tests: its discovery document and an Ed25519 key set served
//! over HTTP on 127.0.0.1 from a thread, and JWTs it signs.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::{Value, json};

pub struct Issuer {
    /// The issuer URL (`iss`), `http://127.0.0.1:PORT/realm`.
    pub url: String,
    key: EncodingKey,
}

const KID: &str = "test-key";

impl Issuer {
    /// Starts serving; the thread lives as long as the test process.
    pub fn start() -> Issuer {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).expect("an Ed25519 key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("the key just made");
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the issuer");
        let url = format!("http://{}/realm", listener.local_addr().unwrap());
        let discovery = json!({"issuer": url, "jwks_uri": format!("{url}/keys")}).to_string();
        let keys = json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "kid": KID, "use": "sig",
            "x": B64.encode(pair.public_key().as_ref()),
        }]})
        .to_string();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut line = String::new();
                if BufReader::new(&stream).read_line(&mut line).is_err() {
                    continue;
                }
                let body = if line.contains("/.well-known/openid-configuration ") {
                    Some(&discovery)
                } else if line.contains("/keys ") {
                    Some(&keys)
                } else {
                    None
                };
                let reply = match body {
                    Some(b) => format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{b}",
                        b.len()
                    ),
                    None => {
                        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            .to_string()
                    }
                };
                let mut stream = stream;
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        Issuer {
            url,
            key: EncodingKey::from_ed_der(pkcs8.as_ref()),
        }
    }

    /// A token for `subject` in `groups`, meant for `audience`, valid for five minutes.
    pub fn token(&self, subject: &str, groups: &[&str], audience: &str) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims: Value = json!({
            "iss": self.url, "aud": audience, "sub": subject, "groups": groups,
            "iat": now, "exp": now + 300,
        });
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(KID.into());
        jsonwebtoken::encode(&header, &claims, &self.key).expect("signing a test token")
    }
}
