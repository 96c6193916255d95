//! The simulated world around a computer: a turtle with position, fuel and a 16-slot inventory in a sparse
//! block map; peripherals on sides; redstone inputs and outputs.
//!
//! Copies from CC:Tweaked (docs/protocols/computercraft.md §8): turtle actions return `true` or `false, "reason"` rather
//! than raising; movement costs one fuel and fails with "Movement obstructed" / "Out of fuel"; digging puts
//! the block into the inventory and queues `turtle_inventory`; `inspect` answers `true, {name, state, tags}`
//! or `false, "No block to inspect"`; a peripheral's unknown method raises "No such method X".

use serde_json::{Value as Json, json};
use std::collections::{BTreeMap, HashMap};

pub type Pos = (i32, i32, i32);

#[derive(Debug, Clone)]
pub struct Turtle {
    pub pos: Pos,
    /// 0 north (-z), 1 east (+x), 2 south (+z), 3 west (-x).
    pub facing: u8,
    pub fuel: u32,
    pub fuel_limit: u32,
    pub slots: [Option<(String, u32)>; 16],
    pub selected: usize,
    pub blocks: HashMap<Pos, String>,
}

impl Default for Turtle {
    fn default() -> Self {
        Self {
            pos: (0, 0, 0),
            facing: 0,
            fuel: 0,
            fuel_limit: 20_000,
            slots: Default::default(),
            selected: 0,
            blocks: HashMap::new(),
        }
    }
}

/// What a turtle command did: its reply values, and whether the inventory changed.
pub struct Outcome {
    pub values: Vec<Json>,
    pub inventory_changed: bool,
}

fn ok(values: Vec<Json>) -> Outcome {
    Outcome {
        values,
        inventory_changed: false,
    }
}

fn fail(reason: &str) -> Outcome {
    ok(vec![json!(false), json!(reason)])
}

pub const COMMANDS: &[&str] = &[
    "forward",
    "back",
    "up",
    "down",
    "turnLeft",
    "turnRight",
    "dig",
    "digUp",
    "digDown",
    "place",
    "placeUp",
    "placeDown",
    "detect",
    "detectUp",
    "detectDown",
    "inspect",
    "inspectUp",
    "inspectDown",
    "refuel",
    "select",
];

pub const QUERIES: &[&str] = &[
    "getSelectedSlot",
    "getItemCount",
    "getItemSpace",
    "getItemDetail",
    "getFuelLevel",
    "getFuelLimit",
];

impl Turtle {
    fn ahead(&self, dir: &str) -> Pos {
        let (x, y, z) = self.pos;
        let (dx, dz) = match self.facing {
            0 => (0, -1),
            1 => (1, 0),
            2 => (0, 1),
            _ => (-1, 0),
        };
        match dir {
            "up" => (x, y + 1, z),
            "down" => (x, y - 1, z),
            "back" => (x - dx, y, z - dz),
            _ => (x + dx, y, z + dz),
        }
    }

    fn add_item(&mut self, name: &str) -> bool {
        let order = (self.selected..16).chain(0..self.selected);
        let order: Vec<usize> = order.collect();
        for &i in &order {
            if let Some((n, c)) = &mut self.slots[i]
                && n == name
                && *c < 64
            {
                *c += 1;
                return true;
            }
        }
        for &i in &order {
            if self.slots[i].is_none() {
                self.slots[i] = Some((name.to_string(), 1));
                return true;
            }
        }
        false
    }

    fn slot_arg(args: &[Json], default: usize) -> Result<usize, String> {
        match args.first().and_then(Json::as_f64) {
            None => Ok(default),
            Some(s) if (1.0..=16.0).contains(&s) => Ok(s as usize - 1),
            Some(_) => Err("bad argument #1 (Slot out of range)".into()),
        }
    }

    /// A command that yields for `turtle_response`; `Err` is a Lua error raised at the call.
    pub fn command(&mut self, name: &str, args: &[Json]) -> Result<Outcome, String> {
        let dir = |suffix: &'static str| -> &'static str {
            if name.ends_with("Up") {
                "up"
            } else if name.ends_with("Down") {
                "down"
            } else {
                suffix
            }
        };
        Ok(match name {
            "forward" | "back" | "up" | "down" => {
                if self.fuel == 0 {
                    return Ok(fail("Out of fuel"));
                }
                let target = self.ahead(name);
                if self.blocks.contains_key(&target) {
                    return Ok(fail("Movement obstructed"));
                }
                self.pos = target;
                self.fuel -= 1;
                ok(vec![json!(true)])
            }
            "turnLeft" => {
                self.facing = (self.facing + 3) % 4;
                ok(vec![json!(true)])
            }
            "turnRight" => {
                self.facing = (self.facing + 1) % 4;
                ok(vec![json!(true)])
            }
            "dig" | "digUp" | "digDown" => {
                let target = self.ahead(dir("forward"));
                match self.blocks.get(&target).cloned() {
                    None => fail("Nothing to dig here"),
                    Some(b) if b == "minecraft:bedrock" => fail("Cannot break unbreakable block"),
                    Some(b) => {
                        self.blocks.remove(&target);
                        let changed = self.add_item(&b);
                        Outcome {
                            values: vec![json!(true)],
                            inventory_changed: changed,
                        }
                    }
                }
            }
            "place" | "placeUp" | "placeDown" => {
                let target = self.ahead(dir("forward"));
                let Some((item, count)) = self.slots[self.selected].clone() else {
                    return Ok(fail("No items to place"));
                };
                if self.blocks.contains_key(&target) {
                    return Ok(fail("Cannot place block here"));
                }
                self.blocks.insert(target, item.clone());
                self.slots[self.selected] = if count > 1 {
                    Some((item, count - 1))
                } else {
                    None
                };
                Outcome {
                    values: vec![json!(true)],
                    inventory_changed: true,
                }
            }
            "detect" | "detectUp" | "detectDown" => ok(vec![json!(
                self.blocks.contains_key(&self.ahead(dir("forward")))
            )]),
            "inspect" | "inspectUp" | "inspectDown" => {
                match self.blocks.get(&self.ahead(dir("forward"))) {
                    None => fail("No block to inspect"),
                    Some(b) => ok(vec![
                        json!(true),
                        json!({"name": b, "state": {}, "tags": {}}),
                    ]),
                }
            }
            "select" => {
                self.selected = Self::slot_arg(args, self.selected)?;
                ok(vec![json!(true)])
            }
            "refuel" => {
                let limit = args
                    .first()
                    .and_then(Json::as_f64)
                    .map_or(u32::MAX, |n| n as u32);
                let Some((item, count)) = self.slots[self.selected].clone() else {
                    return Ok(fail("No items to combust"));
                };
                let per = match item.as_str() {
                    "minecraft:coal" | "minecraft:charcoal" => 80,
                    "minecraft:lava_bucket" => 1000,
                    _ => return Ok(fail("Items not combustible")),
                };
                let used = count.min(limit);
                self.fuel = (self.fuel + used * per).min(self.fuel_limit);
                self.slots[self.selected] = if count > used {
                    Some((item, count - used))
                } else {
                    None
                };
                Outcome {
                    values: vec![json!(true)],
                    inventory_changed: used > 0,
                }
            }
            other => return Err(format!("unknown turtle command {other}")),
        })
    }

    pub fn query(&self, name: &str, args: &[Json]) -> Result<Vec<Json>, String> {
        Ok(match name {
            "getSelectedSlot" => vec![json!(self.selected + 1)],
            "getFuelLevel" => vec![json!(self.fuel)],
            "getFuelLimit" => vec![json!(self.fuel_limit)],
            "getItemCount" => {
                vec![json!(
                    self.slots[Self::slot_arg(args, self.selected)?]
                        .as_ref()
                        .map_or(0, |s| s.1)
                )]
            }
            "getItemSpace" => {
                vec![json!(
                    64 - self.slots[Self::slot_arg(args, self.selected)?]
                        .as_ref()
                        .map_or(0, |s| s.1)
                )]
            }
            "getItemDetail" => match &self.slots[Self::slot_arg(args, self.selected)?] {
                None => vec![Json::Null],
                Some((n, c)) => vec![json!({"name": n, "count": c})],
            },
            other => return Err(format!("unknown turtle query {other}")),
        })
    }
}

#[derive(Debug, Clone)]
pub enum Peripheral {
    /// A generic inventory (`minecraft:chest`, type `inventory`).
    Chest { items: BTreeMap<u32, (String, u32)> },
    /// Records the notes it was asked to play.
    Speaker { played: Vec<String> },
}

impl Peripheral {
    pub fn types(&self) -> Vec<&'static str> {
        match self {
            Self::Chest { .. } => vec!["minecraft:chest", "inventory"],
            Self::Speaker { .. } => vec!["speaker"],
        }
    }

    pub fn methods(&self) -> Vec<&'static str> {
        match self {
            Self::Chest { .. } => vec!["getItemDetail", "list", "size"],
            Self::Speaker { .. } => vec!["playNote", "playSound"],
        }
    }

    pub fn call(&mut self, method: &str, args: &[Json]) -> Result<Vec<Json>, String> {
        match (self, method) {
            (Self::Chest { .. }, "size") => Ok(vec![json!(27)]),
            (Self::Chest { items }, "list") => {
                let map: serde_json::Map<String, Json> = items
                    .iter()
                    .map(|(slot, (name, count))| {
                        (slot.to_string(), json!({"name": name, "count": count}))
                    })
                    .collect();
                Ok(vec![Json::Object(map)])
            }
            (Self::Chest { items }, "getItemDetail") => {
                let slot = args
                    .first()
                    .and_then(Json::as_f64)
                    .ok_or("bad argument #1 (number expected)")?;
                Ok(vec![items.get(&(slot as u32)).map_or(
                    Json::Null,
                    |(n, c)| json!({"name": n, "count": c}),
                )])
            }
            (Self::Speaker { played }, "playNote" | "playSound") => {
                let what = args
                    .first()
                    .and_then(Json::as_str)
                    .ok_or("bad argument #1 (string expected)")?;
                played.push(what.to_string());
                Ok(vec![json!(true)])
            }
            (_, m) => Err(format!("No such method {m}")),
        }
    }
}

pub const SIDES: [&str; 6] = ["top", "bottom", "left", "right", "front", "back"];

#[derive(Debug, Clone, Default)]
pub struct World {
    pub turtle: Option<Turtle>,
    pub peripherals: BTreeMap<String, Peripheral>,
    pub redstone_in: HashMap<String, u8>,
    pub redstone_out: HashMap<String, u8>,
}

impl World {
    pub fn redstone(&mut self, op: &str, args: &[Json]) -> Result<Vec<Json>, String> {
        let side = args
            .first()
            .and_then(Json::as_str)
            .ok_or("bad argument #1 (string expected)")?;
        if !SIDES.contains(&side) {
            return Err(format!("bad argument #1 (unknown option {side})"));
        }
        let input = *self.redstone_in.get(side).unwrap_or(&0);
        let output = *self.redstone_out.get(side).unwrap_or(&0);
        Ok(match op {
            "getInput" => vec![json!(input > 0)],
            "getAnalogInput" => vec![json!(input)],
            "getOutput" => vec![json!(output > 0)],
            "getAnalogOutput" => vec![json!(output)],
            "setOutput" => {
                let on = args
                    .get(1)
                    .and_then(Json::as_bool)
                    .ok_or("bad argument #2 (boolean expected)")?;
                self.redstone_out
                    .insert(side.to_string(), if on { 15 } else { 0 });
                vec![]
            }
            "setAnalogOutput" => {
                let level = args
                    .get(1)
                    .and_then(Json::as_f64)
                    .ok_or("bad argument #2 (number expected)")?;
                if !(0.0..=15.0).contains(&level) {
                    return Err("Expected number in range 0-15".into());
                }
                self.redstone_out.insert(side.to_string(), level as u8);
                vec![]
            }
            other => return Err(format!("unknown redstone function {other}")),
        })
    }
}
