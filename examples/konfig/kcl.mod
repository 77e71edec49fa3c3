[package]
name = "konfig"
edition = "*"
version = "0.1.0"

[dependencies]
k8s = { path = "vendor/k8s" }
