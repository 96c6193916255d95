//! The game port under the idle and slow-loris load of issue 8 item 4: the game still connects and calls
//! still work while stray connections hold sockets open (the core's `net` tests show the same connections
//! being closed at their deadlines and the cap holding).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use support::*;

#[tokio::test]
async fn the_game_connects_and_calls_work_past_idle_and_slow_connections() {
    let h = start(game_args()).await;
    let addr = h.game_addr;
    let idle = mcp_testkit::idle_connections(addr, 40).await;
    let slow: Vec<_> = (0..10)
        .map(|_| mcp_testkit::slow_loris(addr, b"GET / HTTP/1.1\r\nX-Slow: "))
        .collect();

    let game = v3();
    let _conn = within("the game to connect", h.connect(&game)).await;
    let client = http_client(h.mcp_addr, Era::Modern).await;
    let listed = ok_of(&call(&client, "list_files", json!({})).await);
    assert_eq!(listed["files"], json!([]));
    for task in slow {
        task.abort();
    }
    drop(idle);
}
