[package]
name = "p"
