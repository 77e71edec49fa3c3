//! AWS KMS as the state key's keeper (envelope encryption): KMS makes a 256-bit data key for
//! a stack once (`GenerateDataKey`) and keeps the master key; the stack records only the data
//! key encrypted by KMS, and each process asks KMS to decrypt it (`Decrypt`). Whoever may call
//! `kms:Decrypt` on the master key can read the stack's sealed values; nobody else, even with
//! the state files.
//!
//! Requests use the KMS JSON protocol (`X-Amz-Target: TrentService.<Action>`), signed with AWS
//! Signature Version 4 from `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`.
//! The endpoint is `AWS_ENDPOINT_URL_KMS`, else `AWS_ENDPOINT_URL`, else
//! `https://kms.<region>.amazonaws.com`; the region `AWS_REGION`, else `AWS_DEFAULT_REGION`,
//! else `us-east-1`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ring::hmac;
use sha2::{Digest, Sha256};

/// A KMS key and how to reach it.
#[derive(Clone)]
pub struct Kms {
    pub key_id: String,
    endpoint: String,
    region: String,
    access_key: String,
    secret_key: String,
    session_token: Option<String>,
}

impl Kms {
    /// The key named by `KUSION_STATE_KMS_KEY_ID`, reached as the environment says.
    pub fn from_env(key_id: &str) -> Result<Kms, String> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let region = env("AWS_REGION")
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".into());
        let endpoint = env("AWS_ENDPOINT_URL_KMS")
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://kms.{region}.amazonaws.com"));
        let access_key = env("AWS_ACCESS_KEY_ID")
            .ok_or("AWS KMS needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")?;
        let secret_key = env("AWS_SECRET_ACCESS_KEY")
            .ok_or("AWS KMS needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")?;
        Ok(Kms {
            key_id: key_id.to_string(),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            region,
            access_key,
            secret_key,
            session_token: env("AWS_SESSION_TOKEN"),
        })
    }

    /// A new data key: (plaintext, KMS ciphertext blob).
    pub fn generate_data_key(&self) -> Result<(Vec<u8>, Vec<u8>), String> {
        let answer = self.call(
            "GenerateDataKey",
            &serde_json::json!({"KeyId": self.key_id, "KeySpec": "AES_256"}),
        )?;
        let field = |name: &str| {
            answer
                .get(name)
                .and_then(serde_json::Value::as_str)
                .and_then(|s| B64.decode(s).ok())
                .ok_or_else(|| format!("KMS GenerateDataKey: no {name} in the answer"))
        };
        Ok((field("Plaintext")?, field("CiphertextBlob")?))
    }

    /// The plaintext of a data key KMS encrypted.
    pub fn decrypt(&self, blob: &[u8]) -> Result<Vec<u8>, String> {
        let answer = self.call(
            "Decrypt",
            &serde_json::json!({"KeyId": self.key_id, "CiphertextBlob": B64.encode(blob)}),
        )?;
        answer
            .get("Plaintext")
            .and_then(serde_json::Value::as_str)
            .and_then(|s| B64.decode(s).ok())
            .ok_or_else(|| "KMS Decrypt: no Plaintext in the answer".into())
    }

    /// One signed KMS call; the JSON answer, or the error KMS gave.
    pub fn call(
        &self,
        action: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let body = body.to_string();
        let url = url::Url::parse(&self.endpoint)
            .map_err(|e| format!("KMS endpoint {:?}: {e}", self.endpoint))?;
        let host = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        };
        let now = std::time::SystemTime::now();
        let stamp = humantime::format_rfc3339_seconds(now).to_string();
        // 2026-11-25T10:00:00Z -> 20261125T100000Z
        let amz_date: String = stamp
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let date = &amz_date[..8];
        let target = format!("TrentService.{action}");
        let payload_hash = hex(&Sha256::digest(body.as_bytes()));
        let mut headers: Vec<(&str, String)> = vec![
            ("content-type", "application/x-amz-json-1.1".into()),
            ("host", host),
            ("x-amz-date", amz_date.clone()),
            ("x-amz-target", target.clone()),
        ];
        if let Some(token) = &self.session_token {
            headers.push(("x-amz-security-token", token.clone()));
        }
        headers.sort_by(|a, b| a.0.cmp(b.0));
        let signed_headers = headers
            .iter()
            .map(|(k, _)| *k)
            .collect::<Vec<_>>()
            .join(";");
        let canonical = format!(
            "POST\n/\n\n{}\n{signed_headers}\n{payload_hash}",
            headers
                .iter()
                .map(|(k, v)| format!("{k}:{}\n", v.trim()))
                .collect::<String>()
        );
        let scope = format!("{date}/{}/kms/aws4_request", self.region);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex(&Sha256::digest(canonical.as_bytes()))
        );
        let sign = |key: &[u8], data: &str| {
            hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
                .as_ref()
                .to_vec()
        };
        let k_date = sign(format!("AWS4{}", self.secret_key).as_bytes(), date);
        let k_region = sign(&k_date, &self.region);
        let k_service = sign(&k_region, "kms");
        let k_signing = sign(&k_service, "aws4_request");
        let signature = hex(&sign(&k_signing, &to_sign));
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            self.access_key
        );
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .build()
            .into();
        let mut request = agent
            .post(format!("{}/", self.endpoint))
            .header("authorization", &authorization);
        for (k, v) in &headers {
            if *k != "host" {
                request = request.header(*k, v);
            }
        }
        let mut response = request
            .send(body.as_bytes())
            .map_err(|e| format!("KMS {action} at {}: {e}", self.endpoint))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("KMS {action}: {e}"))?;
        let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if status != 200 {
            let kind = value
                .get("__type")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("error");
            let message = value
                .get("message")
                .or_else(|| value.get("Message"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or(&text);
            return Err(format!(
                "KMS {action} on key {:?}: {kind} (HTTP {status}): {message}",
                self.key_id
            ));
        }
        Ok(value)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
