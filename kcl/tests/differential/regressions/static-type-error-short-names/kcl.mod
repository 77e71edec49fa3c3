[package]
name = "t2"
