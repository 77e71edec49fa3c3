pub mod placeholder {}
pub mod plugin;
