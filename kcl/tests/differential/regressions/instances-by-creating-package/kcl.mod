[package]
name = "p2"
