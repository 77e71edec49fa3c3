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

/// A KMS key and how to reach it.
#[derive(Clone, Debug)]
pub struct Kms {
    /// The KMS key's ID or ARN.
    pub key_id: String,
    service: kusion_aws::JsonService,
}

impl Kms {
    /// The key named by `KUSION_STATE_KMS_KEY_ID`, reached as the environment says.
    pub fn from_env(key_id: &str) -> Result<Kms, String> {
        Ok(Kms {
            key_id: key_id.to_string(),
            service: kusion_aws::JsonService::from_env(&kusion_aws::KMS)
                .map_err(|e| e.to_string())?,
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
        self.service.call(action, body).map_err(|e| match e {
            kusion_aws::AwsError::Service { .. } => format!("{e} (key {:?})", self.key_id),
            e => e.to_string(),
        })
    }
}
