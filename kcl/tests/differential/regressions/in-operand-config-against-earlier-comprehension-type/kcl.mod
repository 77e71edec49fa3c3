[package]
name = "prog"
