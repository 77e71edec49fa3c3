[package]
name = "x"
