[package]
name = "k8s"
edition = "*"
version = "1.31.0"
