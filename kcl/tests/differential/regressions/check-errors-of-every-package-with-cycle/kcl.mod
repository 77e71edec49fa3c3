[package]
name = "mp"
