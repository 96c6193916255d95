//! Token buckets: `rate` messages a second, bursts of twice that. The relay holds one per connection, one per
//! MCP token (all its links together), one per game for the commands it is sent (from every MCP server
//! together), and one for the events of every game together (the game token).

use std::collections::HashMap;
use std::time::Instant;

#[derive(Debug)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub fn new(rate: u32) -> Self {
        let rate = f64::from(rate.max(1));
        Self {
            rate,
            burst: rate * 2.0,
            tokens: rate * 2.0,
            last: Instant::now(),
        }
    }

    /// Takes one token, or says how many ms until one is there.
    pub fn take(&mut self) -> Result<(), u64> {
        let now = Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err((((1.0 - self.tokens) / self.rate) * 1000.0).ceil() as u64)
        }
    }

    /// Full again (a bucket that was never short needs no keeping).
    fn is_full(&self) -> bool {
        let elapsed = self.last.elapsed().as_secs_f64();
        self.tokens + elapsed * self.rate >= self.burst
    }
}

/// Which limit refused a message; named in the refusal's details and in `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One link (`--mcp-rate`, `--game-rate`).
    Connection,
    /// Every link of one MCP token together (`--mcp-token-rate`).
    Token,
    /// The commands sent to one game, from every MCP server together (`--game-command-rate`).
    Game,
    /// The events of every game together (`--games-event-rate`, the game token's limit).
    Games,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Connection, Scope::Token, Scope::Game, Scope::Games];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Connection => "connection",
            Scope::Token => "token",
            Scope::Game => "game",
            Scope::Games => "games",
        }
    }

    /// The flag that sets this limit, for refusals that say what to change.
    pub fn flag(self, game_side: bool) -> &'static str {
        match (self, game_side) {
            (Scope::Connection, false) => "--mcp-rate",
            (Scope::Connection, true) => "--game-rate",
            (Scope::Token, _) => "--mcp-token-rate",
            (Scope::Game, _) => "--game-command-rate",
            (Scope::Games, _) => "--games-event-rate",
        }
    }
}

/// The buckets shared between links. Keyed buckets are made on first use and forgotten once full again, so
/// names that come and go hold nothing.
#[derive(Debug)]
pub struct Shared {
    token_rate: u32,
    game_rate: u32,
    tokens: HashMap<usize, Bucket>,
    games: HashMap<String, Bucket>,
    all_games: Bucket,
}

/// Most keyed buckets kept before the full ones are swept.
const SWEEP_AT: usize = 1024;

impl Shared {
    pub fn new(token_rate: u32, game_command_rate: u32, games_event_rate: u32) -> Self {
        Self {
            token_rate,
            game_rate: game_command_rate,
            tokens: HashMap::new(),
            games: HashMap::new(),
            all_games: Bucket::new(games_event_rate),
        }
    }

    /// One message from a link of MCP token `token`.
    pub fn take_token(&mut self, token: usize) -> Result<(), u64> {
        let rate = self.token_rate;
        self.tokens
            .entry(token)
            .or_insert_with(|| Bucket::new(rate))
            .take()
    }

    /// One command to game `game`.
    pub fn take_game(&mut self, game: &str) -> Result<(), u64> {
        if self.games.len() >= SWEEP_AT {
            self.games.retain(|_, b| !b.is_full());
        }
        let rate = self.game_rate;
        match self.games.get_mut(game) {
            Some(b) => b.take(),
            None => {
                let mut b = Bucket::new(rate);
                let r = b.take();
                self.games.insert(game.to_owned(), b);
                r
            }
        }
    }

    /// One event from any game.
    pub fn take_games(&mut self) -> Result<(), u64> {
        self.all_games.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_gives_its_burst_then_refuses_with_a_wait() {
        let mut b = Bucket::new(10);
        for _ in 0..20 {
            assert!(b.take().is_ok());
        }
        let wait = b.take().unwrap_err();
        assert!((1..=100).contains(&wait), "{wait}");
    }

    #[test]
    fn tokens_and_games_each_have_their_own_bucket() {
        let mut s = Shared::new(5, 5, 5);
        for _ in 0..10 {
            assert!(s.take_token(0).is_ok());
            assert!(s.take_game("a").is_ok());
            assert!(s.take_games().is_ok());
        }
        assert!(s.take_token(0).is_err());
        assert!(s.take_token(1).is_ok(), "another token has its own");
        assert!(s.take_game("a").is_err());
        assert!(s.take_game("b").is_ok(), "another game has its own");
        assert!(s.take_games().is_err());
    }
}
