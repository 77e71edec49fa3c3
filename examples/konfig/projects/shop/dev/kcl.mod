[package]
name = "shop-dev"
edition = "*"
version = "0.1.0"

[dependencies]
konfig = { path = "../../.." }
k8s = { path = "../../../vendor/k8s" }
