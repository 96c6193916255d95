//! Placeholder replaced below.
use crate::config::{DebugArgs, HostArgs};
use bridge_core::BridgeError;
pub async fn run(_args: DebugArgs, _host: HostArgs) -> Result<(), BridgeError> {
    Ok(())
}
