//! AWS JSON-protocol calls (`X-Amz-Target: <Prefix>.<Action>`) signed with Signature Version 4.
//!
//! Credentials come from `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`; the
//! region from `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`; the endpoint from the
//! service's own variable (`AWS_ENDPOINT_URL_KMS`, `AWS_ENDPOINT_URL_SECRETS_MANAGER`), else
//! `AWS_ENDPOINT_URL`, else `https://<signing name>.<region>.amazonaws.com`.

use ring::hmac;
use sha2::{Digest, Sha256};

/// A service speaking the JSON protocol.
#[derive(Debug, Clone, Copy)]
pub struct Service {
    /// Shown in errors: `KMS`, `Secrets Manager`.
    pub display: &'static str,
    /// The SigV4 signing name and endpoint host prefix: `kms`, `secretsmanager`.
    pub signing_name: &'static str,
    /// The `X-Amz-Target` prefix: `TrentService`, `secretsmanager`.
    pub target_prefix: &'static str,
    /// The service's own endpoint variable.
    pub endpoint_env: &'static str,
}

pub const KMS: Service = Service {
    display: "KMS",
    signing_name: "kms",
    target_prefix: "TrentService",
    endpoint_env: "AWS_ENDPOINT_URL_KMS",
};

pub const SECRETS_MANAGER: Service = Service {
    display: "Secrets Manager",
    signing_name: "secretsmanager",
    target_prefix: "secretsmanager",
    endpoint_env: "AWS_ENDPOINT_URL_SECRETS_MANAGER",
};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    #[error("AWS {service} needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")]
    NoCredentials { service: &'static str },
    #[error("AWS {service} endpoint {endpoint:?}: {message}")]
    Endpoint {
        service: &'static str,
        endpoint: String,
        message: String,
    },
    /// The service could not be reached or its answer not read.
    #[error("AWS {service} {action} at {endpoint}: {message}")]
    Transport {
        service: &'static str,
        action: String,
        endpoint: String,
        message: String,
    },
    /// The service answered with an error (`kind` is its `__type`, e.g.
    /// `ResourceNotFoundException`).
    #[error("AWS {service} {action}: {kind} (HTTP {status}): {message}")]
    Service {
        service: &'static str,
        action: String,
        kind: String,
        status: u16,
        message: String,
    },
}

/// A JSON-protocol service and how to reach it.
#[derive(Clone)]
pub struct JsonService {
    service: Service,
    endpoint: String,
    region: String,
    access_key: String,
    secret_key: String,
    session_token: Option<String>,
}

impl std::fmt::Debug for JsonService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Credentials stay out of logs.
        f.debug_struct("JsonService")
            .field("service", &self.service.display)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl JsonService {
    /// The service reached as the environment says.
    pub fn from_env(service: &Service) -> Result<JsonService, AwsError> {
        JsonService::from_env_with(service, None)
    }

    /// As [`JsonService::from_env`], with an endpoint that takes precedence when given.
    pub fn from_env_with(
        service: &Service,
        endpoint: Option<&str>,
    ) -> Result<JsonService, AwsError> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let region = env("AWS_REGION")
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".into());
        let endpoint = endpoint
            .map(str::to_string)
            .or_else(|| env(service.endpoint_env))
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://{}.{region}.amazonaws.com", service.signing_name));
        let missing = || AwsError::NoCredentials {
            service: service.display,
        };
        let access_key = env("AWS_ACCESS_KEY_ID").ok_or_else(missing)?;
        let secret_key = env("AWS_SECRET_ACCESS_KEY").ok_or_else(missing)?;
        Ok(JsonService {
            service: *service,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            region,
            access_key,
            secret_key,
            session_token: env("AWS_SESSION_TOKEN"),
        })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// One signed call of `action`; the JSON answer, or the error the service gave.
    pub fn call(
        &self,
        action: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, AwsError> {
        let service = self.service.display;
        let body = body.to_string();
        let url = url::Url::parse(&self.endpoint).map_err(|e| AwsError::Endpoint {
            service,
            endpoint: self.endpoint.clone(),
            message: e.to_string(),
        })?;
        let host = match url.port() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        };
        let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        // 2026-11-25T10:00:00Z -> 20261125T100000Z
        let amz_date: String = stamp
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let date = &amz_date[..8];
        let payload_hash = hex(&Sha256::digest(body.as_bytes()));
        let mut headers: Vec<(&str, String)> = vec![
            ("content-type", "application/x-amz-json-1.1".into()),
            ("host", host),
            ("x-amz-date", amz_date.clone()),
            (
                "x-amz-target",
                format!("{}.{action}", self.service.target_prefix),
            ),
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
        let scope = format!(
            "{date}/{}/{}/aws4_request",
            self.region, self.service.signing_name
        );
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
        let k_service = sign(&k_region, self.service.signing_name);
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
        let transport = |message: String| AwsError::Transport {
            service,
            action: action.to_string(),
            endpoint: self.endpoint.clone(),
            message,
        };
        let mut response = request
            .send(body.as_bytes())
            .map_err(|e| transport(e.to_string()))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| transport(e.to_string()))?;
        let value: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if status != 200 {
            let kind = value
                .get("__type")
                .and_then(serde_json::Value::as_str)
                .map(|k| k.rsplit('#').next().unwrap_or(k))
                .unwrap_or("error")
                .to_string();
            let message = value
                .get("message")
                .or_else(|| value.get("Message"))
                .and_then(serde_json::Value::as_str)
                .unwrap_or(&text)
                .to_string();
            return Err(AwsError::Service {
                service,
                action: action.to_string(),
                kind,
                status,
                message,
            });
        }
        Ok(value)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
