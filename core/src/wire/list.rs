//! LIST bodies: the decoded list, and its decoder, which reads items while the body is still
//! arriving.
//!
//! A LIST of 10k pods is tens of megabytes that the apiserver writes over half a second or
//! more. Reading it whole and parsing it afterwards adds the whole parse to the time to
//! first sync, and holds the body and the decoded objects in memory at once. [`ListDecoder`]
//! takes the body in chunks as they come off the socket and decodes each item as soon as its
//! last byte is in, so the parse overlaps the transfer and only the bytes of the item that
//! straddles a chunk edge are ever copied. client-go gets the same overlap from a streaming
//! list (`sendInitialEvents`).
//!
//! serde_json reads every value and says where it ended, so the bytes are read once; the
//! decoder itself only walks the few bytes between values (`,`, `:`, whitespace, member
//! names). [`parse_list`] is this decoder fed one chunk, so a whole body and a
//! streamed one are accepted and rejected alike.
//!
//! A body that starts with `k` (the first byte of protobuf's `k8s\0` magic, and of no JSON
//! body) is Kubernetes protobuf (issue 16; see [`protobuf`]), read the same
//! way: each item decoded as soon as its last byte is in, under the same [`ListLimits`].
//!
//! ```
//! use reconcile_core::list::ListDecoder;
//! use reconcile_core::pod::PodView;
//!
//! let body = br#"{"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a","namespace":"ns"}}]}"#;
//! let mut decoder = ListDecoder::<PodView>::new();
//! for chunk in body.chunks(5) {
//!     decoder.push(chunk).unwrap();
//! }
//! let list = decoder.finish().unwrap();
//! assert_eq!(list.resource_version, "7");
//! assert_eq!(list.items.len(), 1);
//! ```

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::error::Category;
use serde_json::value::RawValue;

use crate::wire::object::Object;
use crate::wire::protobuf;

pub(crate) mod budget;

use budget::{Budgeted, Spent};

/// A LIST response body: the version it was built at, and its items.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectList<O> {
    /// `metadata.resourceVersion`: where the following WATCH starts.
    pub resource_version: String,
    /// The items that decoded, in the order the apiserver sent them.
    pub items: Vec<O>,
    /// The items that did not decode; they are left out of the listing.
    pub skipped: Vec<ItemError>,
    /// The body's length in bytes, as read.
    pub body_bytes: u64,
    /// `metadata.continue`: the token of the next page of a paged LIST; `None` (or empty)
    /// on the last page and on an unpaged LIST.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`: how many items the pages after this one hold, when the
    /// apiserver says (an estimate; absent with a selector).
    pub remaining_item_count: Option<u64>,
    /// `metadata.shardInfo.selector`: the shard selector the apiserver applied (KEP-5866);
    /// `None` when it filtered nothing by shard, or ignored the selector asked for.
    pub shard_selector: Option<String>,
}

/// A LIST item that did not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemError {
    /// Position in `items`.
    pub index: usize,
    /// Why it did not decode.
    pub message: String,
}

/// A LIST body that cannot be used at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListBodyError {
    /// Not a JSON list object.
    #[error("LIST body is not a list: {0}")]
    Malformed(String),
    /// No `metadata.resourceVersion`, so there is no cursor to watch from.
    #[error("LIST body has no metadata.resourceVersion")]
    NoResourceVersion,
    /// The decoded listing would hold more memory than [`ListLimits`] allows for the bytes
    /// read so far: a body of many tiny or empty items, each of which decodes into a whole
    /// object. The decoder stops before holding it.
    #[error(
        "LIST body decodes too large: items[{index}] (from byte {at}) would bring what the listing \
         holds to {held} bytes, over the bound of {limit} bytes for the {read} bytes read \
         (ListLimits: {multiple}x the bytes read + {allowance})"
    )]
    TooLarge {
        /// The item that crossed the bound (its position in `items`).
        index: usize,
        /// Where it starts in the body.
        at: u64,
        /// What the listing would hold with it, as the decoder charges it (see
        /// [`ListLimits`]).
        held: u64,
        /// The bound at that point.
        limit: u64,
        /// Body bytes read so far.
        read: u64,
        /// [`ListLimits::multiple`].
        multiple: u64,
        /// [`ListLimits::allowance`].
        allowance: u64,
    },
    /// The body holds more items than [`ListLimits::max_items`].
    #[error("LIST body has more than {limit} items: items[{index}] starts at byte {at}")]
    TooManyItems {
        /// [`ListLimits::max_items`].
        limit: usize,
        /// The first item over it.
        index: usize,
        /// Where it starts in the body.
        at: u64,
    },
}

/// How much a [`ListDecoder`] may hold for the bytes it was given (issue 17).
///
/// Each item is decoded under a budget that charges what serde builds as it builds it:
/// `size_of` each sequence element and map entry, the length of each string handed over
/// (skipped members cost nothing), plus the item's slot in the listing's vector, counted over
/// the vector's capacity so its growth is included. A skipped item is charged its
/// [`ItemError`] and message; the list's other members their bytes. The decoder fails with
/// [`ListBodyError::TooLarge`] as soon as the charge would pass `multiple` × the bytes read so
/// far + `allowance` — inside the item that passes it, before the memory is taken — and with
/// [`ListBodyError::TooManyItems`] at item number `max_items` + 1.
///
/// The charge is a floor of the heap: a `Vec`'s spare capacity while it grows, a `Box` of one
/// value and the allocator's overhead are not seen. Measured with
/// `cargo bench -p reconcile-core --bench amplification` (figures in `docs/alignment.md`,
/// Bounds): real pods (8 KB of JSON, `managedFields` included) hold 0.15–0.19× their body as
/// [`PodView`](crate::pod::PodView)s (charged 0.19–0.30×) and 8× as k8s-openapi `Pod`s
/// (charged 4.4×: `managedFields` as JSON values, whose B-tree nodes the charge undercounts);
/// a body of `{}` items, which held 159× as `PodView`s and 861× as `Pod`s, is refused once the
/// allowance is spent, as is an item of thousands of empty containers (199×).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLimits {
    /// The charge may reach this multiple of the bytes read (default 8: twice what a real
    /// k8s-openapi `Pod` listing is charged, so the largest body a driver accepts still
    /// decodes as full `Pod`s).
    pub multiple: u64,
    /// Plus this many bytes, whatever was read (default 256 MiB), so that a listing of many
    /// small objects, whose fixed size dwarfs their JSON, still decodes: about 580k empty
    /// `PodView`s (456 bytes each) or 100k empty k8s-openapi `Pod`s (2,464 bytes) on top of
    /// what the multiple covers.
    pub allowance: u64,
    /// At most this many items (default 1,000,000: Kubernetes' scalability limits stop at
    /// 150k pods in a whole cluster).
    pub max_items: usize,
}

impl Default for ListLimits {
    fn default() -> Self {
        ListLimits {
            multiple: 8,
            allowance: 256 << 20,
            max_items: 1_000_000,
        }
    }
}

impl ListLimits {
    /// No bound at all: what the decoder did before issue 17, for measuring (items are then
    /// decoded without the budget's bookkeeping, and [`ListDecoder::charged`] counts only
    /// the listing's slots).
    #[must_use]
    pub fn unbounded() -> Self {
        ListLimits {
            multiple: u64::MAX,
            allowance: u64::MAX,
            max_items: usize::MAX,
        }
    }

    /// The most the listing may hold once `read` bytes were read.
    #[must_use]
    pub fn limit(&self, read: u64) -> u64 {
        self.multiple
            .saturating_mul(read)
            .saturating_add(self.allowance)
    }
}

/// Parses a LIST response body (`{"metadata":{"resourceVersion":…},"items":[…]}`).
///
/// An item that does not decode is skipped and reported in [`ObjectList::skipped`], so that
/// one bad object does not stall the whole listing.
///
/// # Errors
/// [`ListBodyError`] when the body is not a list or carries no resourceVersion.
pub fn parse_list<O: Object>(body: &[u8]) -> Result<ObjectList<O>, ListBodyError> {
    // One implementation for whole bodies and streamed ones, so both accept the same bodies.
    let mut decoder = ListDecoder::new();
    decoder.push(body)?;
    decoder.finish()
}

/// Where the decoder is in the body's outer structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the root `{`.
    Start,
    /// Expecting a member's name; `first` also accepts the root's `}`.
    Key { first: bool },
    /// After a name, expecting `:`.
    Colon,
    /// After `:`, expecting the value.
    Value,
    /// At a member value other than the `items` array.
    InMember,
    /// Expecting an item; `first` also accepts the array's `]`.
    Item { first: bool },
    /// At an item.
    InItem,
    /// After an item, expecting `,` or `]`.
    AfterItem,
    /// After a member, expecting `,` or `}`.
    AfterMember,
    /// After the root `}`: only whitespace may follow.
    Done,
    /// An error was returned; every later call returns it again.
    Failed,
}

/// What reading one value from the bytes at hand gave.
enum Read {
    /// The value ended this many bytes in.
    Complete(usize),
    /// The value goes on past the bytes at hand.
    Incomplete,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The members of the list other than `items`.
#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    metadata: HeaderMeta,
}

#[derive(Deserialize, Default)]
struct HeaderMeta {
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(rename = "continue")]
    continue_token: Option<String>,
    #[serde(rename = "remainingItemCount")]
    remaining_item_count: Option<i64>,
    #[serde(rename = "shardInfo")]
    shard_info: Option<ShardInfo>,
}

/// `metadata.shardInfo` of a LIST filtered by shard.
#[derive(Deserialize, Default)]
struct ShardInfo {
    selector: Option<String>,
}

/// Decodes a LIST response body (`{"metadata":{"resourceVersion":…},"items":[…]}`) pushed in
/// chunks of any size.
///
/// An item that is valid JSON but does not decode as `O` is skipped and reported in
/// [`ObjectList::skipped`], so that one bad object does not stall the whole listing; a body
/// that is not JSON, or not a list, is a [`ListBodyError`]. Memory is the decoded items plus
/// the one value that straddles a chunk edge (the caller bounds the body's length); the
/// decoded items are bounded by [`ListLimits`] in proportion to the bytes read.
#[derive(Debug)]
pub struct ListDecoder<O> {
    state: State,
    limits: ListLimits,
    /// What the items hold beyond their vector slots: their bytes in the body, and the
    /// skipped items' messages.
    charged: u64,
    /// Body bytes pushed so far: error positions are given in these.
    offset: u64,
    /// The start of a value (or member name) that the chunks so far did not complete.
    pending: Vec<u8>,
    /// Where `pending` starts in the body.
    pending_at: u64,
    /// `pending`'s length when it was last tried: it is tried again once it has doubled (or
    /// at a name's closing quote), so that a value split over many small chunks is still
    /// read a bounded number of times.
    tried: usize,
    /// The member name being read, its raw bytes (escapes undecoded).
    key: Vec<u8>,
    key_escaped: bool,
    key_has_escape: bool,
    /// The member at hand is `items` written as something other than an array (only `null`
    /// is accepted).
    items_literal: bool,
    items_seen: bool,
    /// `{` and the members other than `items`, comma-separated; closed and read at the end.
    header: Vec<u8>,
    items: Vec<O>,
    skipped: Vec<ItemError>,
    error: Option<ListBodyError>,
    /// The protobuf decoder, when the body is protobuf (it started with `k`, the magic's
    /// first byte, which no JSON body does).
    protobuf: Option<Box<ProtobufList<O>>>,
}

impl<O: Object> Default for ListDecoder<O> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O: Object> ListDecoder<O> {
    /// A decoder at the start of a body, with the default [`ListLimits`].
    #[must_use]
    pub fn new() -> Self {
        Self::with_limits(ListLimits::default())
    }

    /// A decoder at the start of a body that holds at most what `limits` allow.
    #[must_use]
    pub fn with_limits(limits: ListLimits) -> Self {
        ListDecoder {
            state: State::Start,
            limits,
            charged: 0,
            offset: 0,
            pending: Vec::new(),
            pending_at: 0,
            tried: 0,
            key: Vec::new(),
            key_escaped: false,
            key_has_escape: false,
            items_literal: false,
            items_seen: false,
            header: Vec::from(*b"{"),
            items: Vec::new(),
            skipped: Vec::new(),
            error: None,
            protobuf: None,
        }
    }

    /// Body bytes pushed so far.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.offset
    }

    /// Items decoded so far.
    #[must_use]
    pub fn items(&self) -> usize {
        self.items.len()
    }

    /// What the listing decoded so far holds, as the decoder charges it against its
    /// [`ListLimits`]: a floor of the heap it takes, close to it for small items.
    #[must_use]
    pub fn charged(&self) -> u64 {
        self.held(false)
    }

    /// Takes the next chunk of the body and decodes every item it completes.
    ///
    /// # Errors
    /// The body is not a JSON list; the error stays, and [`ListDecoder::finish`] returns it.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), ListBodyError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let at = self.offset;
        if at == 0 && chunk.first() == Some(&protobuf::MAGIC[0]) {
            self.protobuf = Some(Box::new(ProtobufList::new()));
        }
        self.offset += chunk.len() as u64;
        if let Some(decoder) = &mut self.protobuf {
            return decoder
                .push(chunk, at, self.offset, self.limits)
                .inspect_err(|error| {
                    self.state = State::Failed;
                    self.error = Some(error.clone());
                });
        }
        let result = if self.pending.is_empty() {
            self.consume(chunk, at)
        } else {
            self.pending.extend_from_slice(chunk);
            if self.pending.len() < self.tried.saturating_mul(2) {
                Ok(())
            } else {
                let pending = std::mem::take(&mut self.pending);
                let pending_at = self.pending_at;
                self.consume(&pending, pending_at)
            }
        };
        result.inspect_err(|error| {
            self.state = State::Failed;
            self.pending = Vec::new();
            self.error = Some(error.clone());
        })
    }

    /// Ends the body.
    ///
    /// # Errors
    /// The body was not a complete JSON list, or carried no `metadata.resourceVersion`.
    pub fn finish(mut self) -> Result<ObjectList<O>, ListBodyError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        if let Some(decoder) = self.protobuf.take() {
            return decoder.finish(self.offset);
        }
        if !self.pending.is_empty() {
            // Held back until it doubled: read what is there, so that an error in it is
            // reported as itself rather than as a cut-short body.
            self.tried = 0;
            let pending = std::mem::take(&mut self.pending);
            self.consume(&pending, self.pending_at)?;
        }
        if self.state != State::Done || !self.pending.is_empty() {
            return Err(malformed(self.offset, "the body ends before the list does"));
        }
        self.header.push(b'}');
        let header = serde_json::from_slice::<Header>(&self.header)
            .map_err(|e| ListBodyError::Malformed(format!("list metadata: {e}")))?;
        let resource_version = header
            .metadata
            .resource_version
            .filter(|rv| !rv.is_empty())
            .ok_or(ListBodyError::NoResourceVersion)?;
        Ok(ObjectList {
            resource_version,
            items: self.items,
            skipped: self.skipped,
            body_bytes: self.offset,
            shard_selector: header.metadata.shard_info.and_then(|i| i.selector),
            continue_token: header.metadata.continue_token.filter(|c| !c.is_empty()),
            remaining_item_count: header
                .metadata
                .remaining_item_count
                .and_then(|n| u64::try_from(n).ok()),
        })
    }

    /// Reads `bytes`, which start `base` bytes into the body; whatever the bytes leave
    /// unfinished is kept in `pending`.
    fn consume(&mut self, bytes: &[u8], base: u64) -> Result<(), ListBodyError> {
        // Validated once for all the values in it, so that serde_json reads `str` and skips
        // its per-string check. A character cut by the chunk edge ends the valid prefix; an
        // invalid byte sends the values from it on to serde_json's byte path, whose error
        // (and what it accepts) is the same as a whole-body parse's.
        let (text, invalid) = match simdutf8::compat::from_utf8(bytes) {
            Ok(text) => (text, false),
            Err(e) => {
                let valid = &bytes[..e.valid_up_to()];
                // Cannot fail: `valid_up_to` ends the longest valid prefix.
                let text = std::str::from_utf8(valid).unwrap_or_default();
                (text, e.error_len().is_some())
            }
        };
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                State::Key { .. } if !self.key.is_empty() || self.key_escaped => {
                    i += self.key_bytes(&bytes[i..]);
                }
                State::InMember | State::InItem => {
                    let read = if invalid {
                        self.value(Source::Bytes(&bytes[i..]), base + i as u64)?
                    } else if i < text.len() {
                        self.value(Source::Text(&text[i..]), base + i as u64)?
                    } else {
                        Read::Incomplete
                    };
                    match read {
                        Read::Complete(n) => i += n,
                        Read::Incomplete => {
                            self.pending.extend_from_slice(&bytes[i..]);
                            self.pending_at = base + i as u64;
                            self.tried = bytes.len() - i;
                            return Ok(());
                        }
                    }
                }
                State::Failed => return Err(malformed(base + i as u64, "decoding after an error")),
                _ => {
                    let byte = bytes[i];
                    if !is_whitespace(byte) {
                        self.structural(byte, base + i as u64)?;
                    }
                    // A value's first byte belongs to the value: it is read, not skipped.
                    if !matches!(self.state, State::InMember | State::InItem) {
                        i += 1;
                    }
                }
            }
        }
        Ok(())
    }

    /// One non-whitespace byte outside names and values.
    fn structural(&mut self, byte: u8, at: u64) -> Result<(), ListBodyError> {
        self.state = match (self.state, byte) {
            (State::Start, b'{') => State::Key { first: true },
            (State::Start, _) => return Err(malformed(at, "expected `{` (a list object)")),
            (State::Key { first }, b'"') => {
                self.key.clear();
                // An opening quote marks the name as started even while it is empty.
                self.key.push(b'"');
                self.key_escaped = false;
                self.key_has_escape = false;
                State::Key { first }
            }
            (State::Key { first: true }, b'}') => State::Done,
            (State::Key { .. }, _) => return Err(malformed(at, "expected a member name")),
            (State::Colon, b':') => State::Value,
            (State::Colon, _) => return Err(malformed(at, "expected `:`")),
            (State::Value, _) => self.member_value(byte, at)?,
            (State::Item { .. }, b',' | b':' | b'}') | (State::Item { first: false }, b']') => {
                return Err(malformed(at, "expected an item"));
            }
            (State::Item { first: true }, b']') => State::AfterMember,
            (State::Item { .. }, _) => State::InItem,
            (State::AfterItem, b',') => State::Item { first: false },
            (State::AfterItem, b']') => State::AfterMember,
            (State::AfterItem, _) => {
                return Err(malformed(at, "expected `,` or `]` after an item"));
            }
            (State::AfterMember, b',') => State::Key { first: false },
            (State::AfterMember, b'}') => State::Done,
            (State::AfterMember, _) => {
                return Err(malformed(at, "expected `,` or `}` after a member"));
            }
            (State::Done, _) => return Err(malformed(at, "trailing characters after the list")),
            (State::InMember | State::InItem | State::Failed, _) => {
                return Err(malformed(at, "decoder state"));
            }
        };
        Ok(())
    }

    /// Name bytes up to the closing quote (the name includes its opening quote); returns how
    /// many of `bytes` were consumed.
    fn key_bytes(&mut self, bytes: &[u8]) -> usize {
        for (i, &b) in bytes.iter().enumerate() {
            if self.key_escaped {
                self.key_escaped = false;
            } else if b == b'\\' {
                self.key_escaped = true;
                self.key_has_escape = true;
            } else if b == b'"' {
                self.key.extend_from_slice(&bytes[..=i]);
                self.state = State::Colon;
                return i + 1;
            }
        }
        self.key.extend_from_slice(bytes);
        bytes.len()
    }

    /// The first byte of a member's value; the name is in `key`, quotes included.
    fn member_value(&mut self, byte: u8, at: u64) -> Result<State, ListBodyError> {
        let is_items = if self.key_has_escape {
            serde_json::from_slice::<String>(&self.key)
                .map_err(|e| malformed(at, &format!("member name: {e}")))?
                == "items"
        } else {
            self.key == b"\"items\""
        };
        self.items_literal = false;
        if is_items {
            if self.items_seen {
                return Err(malformed(at, "duplicate member `items`"));
            }
            self.items_seen = true;
            if byte == b'[' {
                self.key.clear();
                return Ok(State::Item { first: true });
            }
            self.items_literal = true;
        } else {
            if self.header.len() > 1 {
                self.header.push(b',');
            }
            self.header.extend_from_slice(&self.key);
            self.header.push(b':');
        }
        self.key.clear();
        Ok(State::InMember)
    }

    /// What the listing holds as the decoder charges it (see [`ListLimits`]), with one more
    /// slot in `items` (or in `skipped`, when `skipped`) if that push would grow it.
    fn held(&self, skipped: bool) -> u64 {
        /// The bytes `v`'s buffer takes after one more push, if `pushing` (`Vec`'s doubling,
        /// at least 4 slots).
        fn slots<T>(v: &Vec<T>, pushing: bool) -> u64 {
            let cap = v.capacity();
            let cap = if pushing && v.len() == cap {
                cap.saturating_mul(2).max(4)
            } else {
                cap
            };
            (cap as u64).saturating_mul(size_of::<T>() as u64)
        }
        slots(&self.items, !skipped)
            .saturating_add(slots(&self.skipped, skipped))
            .saturating_add(self.header.len() as u64)
            .saturating_add(self.charged)
    }

    /// The error for item `index` (starting at `at`), which would bring the listing to `held`.
    fn too_large(&self, index: usize, at: u64, held: u64) -> ListBodyError {
        ListBodyError::TooLarge {
            index,
            at,
            held,
            limit: self.limits.limit(self.offset),
            read: self.offset,
            multiple: self.limits.multiple,
            allowance: self.limits.allowance,
        }
    }

    /// Reads the value at the start of `source` (`at` in the body).
    fn value(&mut self, source: Source<'_>, at: u64) -> Result<Read, ListBodyError> {
        if self.state == State::InItem {
            let index = self.items.len() + self.skipped.len();
            if index >= self.limits.max_items {
                return Err(ListBodyError::TooManyItems {
                    limit: self.limits.max_items,
                    index,
                    at,
                });
            }
            // The item is decoded under what is left of the bound, so that an item that
            // would hold too much fails while it is decoded, not after.
            let before = self.held(false);
            let limit = self.limits.limit(self.offset);
            if before > limit {
                return Err(self.too_large(index, at, before));
            }
            let (result, Spent { used, exceeded }) = if self.limits == ListLimits::unbounded() {
                let read = source
                    .read::<O>()
                    .map(|read| read.map(|(o, n)| (Budgeted(o), n)));
                (read, Spent::default())
            } else {
                budget::within(limit - before, || source.read::<Budgeted<O>>())
            };
            let read = match result {
                Ok(Some((Budgeted(item), n))) => {
                    self.charged = self.charged.saturating_add(used);
                    self.items.push(item);
                    Read::Complete(n)
                }
                Ok(None) => Read::Incomplete,
                Err(_) if exceeded => {
                    return Err(self.too_large(index, at, before.saturating_add(used)));
                }
                Err(e) if e.classify() == Category::Data => match source.read::<&RawValue>() {
                    // Valid JSON that is not an `O`: skipped, as one bad object must not
                    // stall the listing. Charged its message: nothing else of it is kept.
                    Ok(Some((_, n))) => {
                        let message = e.to_string();
                        self.charged = self.charged.saturating_add(message.len() as u64);
                        let held = self.held(true);
                        if held > self.limits.limit(self.offset) {
                            return Err(self.too_large(index, at, held));
                        }
                        self.skipped.push(ItemError { index, message });
                        Read::Complete(n)
                    }
                    Ok(None) => Read::Incomplete,
                    Err(e) => return Err(source.error(at, &format!("items[{index}]"), &e)),
                },
                Err(e) => return Err(source.error(at, &format!("items[{index}]"), &e)),
            };
            if matches!(read, Read::Complete(_)) {
                self.state = State::AfterItem;
            }
            return Ok(read);
        }
        // Skipped, not kept: serde_json skips a value without checking the UTF-8 of its
        // strings, as a whole-body parse skips the members it has no field for.
        let n = match source.read::<IgnoredAny>() {
            Ok(Some((_, n))) => n,
            Ok(None) => return Ok(Read::Incomplete),
            Err(e) => return Err(source.error(at, "list member", &e)),
        };
        let raw = source.bytes(n);
        if self.items_literal {
            if raw != b"null" {
                return Err(malformed(at, "`items` is not an array"));
            }
        } else {
            self.header.extend_from_slice(raw);
        }
        self.state = State::AfterMember;
        Ok(Read::Complete(n))
    }
}

/// The bytes a value is read from: validated text, or bytes with invalid UTF-8 in them.
#[derive(Clone, Copy)]
enum Source<'a> {
    Text(&'a str),
    Bytes(&'a [u8]),
}

impl<'a> Source<'a> {
    /// serde_json's error in a value that starts `at` bytes into the body, placed in the body:
    /// its line and column count from the value's start, which says nothing to a reader.
    fn error(self, at: u64, what: &str, e: &serde_json::Error) -> ListBodyError {
        let line_start = match e.line() {
            0 | 1 => 0,
            line => self
                .as_bytes()
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'\n')
                .nth(line - 2)
                .map_or(0, |(i, _)| i + 1),
        };
        let offset = line_start + e.column().saturating_sub(1);
        let text = e.to_string();
        let message = text
            .rsplit_once(" at line ")
            .map_or(text.as_str(), |(m, _)| m);
        malformed(at + offset as u64, &format!("{what}: {message}"))
    }

    fn as_bytes(self) -> &'a [u8] {
        match self {
            Source::Text(text) => text.as_bytes(),
            Source::Bytes(bytes) => bytes,
        }
    }

    /// The first `n` bytes.
    fn bytes(self, n: usize) -> &'a [u8] {
        &self.as_bytes()[..n]
    }

    /// Reads one value of type `T` from the start; `None` when the bytes end inside it.
    fn read<T: Deserialize<'a>>(self) -> serde_json::Result<Option<(T, usize)>> {
        let (result, n) = match self {
            Source::Text(text) => {
                let mut stream = serde_json::Deserializer::from_str(text).into_iter::<T>();
                (stream.next(), stream.byte_offset())
            }
            Source::Bytes(bytes) => {
                let mut stream = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
                (stream.next(), stream.byte_offset())
            }
        };
        let bytes = self.as_bytes();
        let number = matches!(bytes.first(), Some(b'-' | b'0'..=b'9'));
        match result {
            // A number that runs to the end of the bytes may go on in the next chunk.
            Some(Ok(_)) if number && n == bytes.len() => Ok(None),
            Some(Ok(value)) => Ok(Some((value, n))),
            Some(Err(e)) if e.classify() == Category::Eof => Ok(None),
            Some(Err(e)) => Err(e),
            None => Ok(None),
        }
    }
}

/// Where a [`ProtobufList`] is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Before the `k8s\0` magic.
    Magic,
    /// At a field of the `runtime.Unknown` envelope.
    Envelope,
    /// Inside the envelope's `raw` (the list message), with this many of its bytes to come.
    List { left: u64 },
}

/// Decodes a protobuf LIST body pushed in chunks: `k8s\0`, a `runtime.Unknown` whose
/// `typeMeta.kind` (1.2) must be the type's list kind and whose `raw` (2) is the list message
/// (k8s.io/api's `XxxList`: metadata 1, a `ListMeta`; items 2, each an object's message).
/// Each item is decoded as soon as its last byte is in, so, as for JSON, the parse overlaps
/// the transfer and only the field that straddles a chunk edge is ever copied. Bounded as the
/// JSON decoder is ([`ListLimits`]); an item that does not decode is skipped and reported.
#[derive(Debug)]
struct ProtobufList<O> {
    stage: Stage,
    /// The start of a field the chunks so far did not complete.
    pending: Vec<u8>,
    /// Where `pending` starts in the body.
    pending_at: u64,
    kind_ok: bool,
    meta: protobuf::ListMeta,
    items: Vec<O>,
    skipped: Vec<ItemError>,
    /// What the listing holds, as charged: each item's slot and decoded charge, each skipped
    /// item's error.
    charged: u64,
}

/// A field's header read from the bytes at hand: its number, wire type, the header's length
/// and the value's (0 for a varint, whose bytes the header includes).
struct FieldHead {
    field: u32,
    wire: u8,
    head: usize,
    body: u64,
}

/// A varint at the start of `bytes`: `None` when it goes on past them.
fn varint(bytes: &[u8]) -> Result<Option<(u64, usize)>, &'static str> {
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            if i == 9 && b > 1 {
                return Err("a varint overflows 64 bits");
            }
            return Ok(Some((value, i + 1)));
        }
    }
    if bytes.len() >= 10 {
        Err("a varint longer than 10 bytes")
    } else {
        Ok(None)
    }
}

/// The header of the field at the start of `bytes`, `None` when it goes on past them.
fn field_head(bytes: &[u8]) -> Result<Option<FieldHead>, &'static str> {
    let Some((key, n)) = varint(bytes)? else {
        return Ok(None);
    };
    let field = u32::try_from(key >> 3).map_err(|_| "a field number past 32 bits")?;
    if field == 0 {
        return Err("field number 0");
    }
    let wire = (key & 7) as u8;
    let rest = &bytes[n..];
    let (head, body) = match wire {
        0 => match varint(rest)? {
            Some((_, m)) => (n + m, 0),
            None => return Ok(None),
        },
        1 => (n, 8),
        5 => (n, 4),
        2 => match varint(rest)? {
            Some((len, m)) => (n + m, len),
            None => return Ok(None),
        },
        3 | 4 => return Err("a group (no Kubernetes message has one)"),
        _ => return Err("an invalid wire type"),
    };
    Ok(Some(FieldHead {
        field,
        wire,
        head,
        body,
    }))
}

impl<O: Object> ProtobufList<O> {
    fn new() -> Self {
        ProtobufList {
            stage: Stage::Magic,
            pending: Vec::new(),
            pending_at: 0,
            kind_ok: false,
            meta: protobuf::ListMeta::default(),
            items: Vec::new(),
            skipped: Vec::new(),
            charged: 0,
        }
    }

    /// Takes `chunk`, which starts `at` bytes into the body; `read` bytes are in with it.
    fn push(
        &mut self,
        chunk: &[u8],
        at: u64,
        read: u64,
        limits: ListLimits,
    ) -> Result<(), ListBodyError> {
        if self.pending.is_empty() {
            let used = self.run(chunk, at, read, limits)?;
            self.pending.extend_from_slice(&chunk[used..]);
            self.pending_at = at + used as u64;
        } else {
            let mut pending = std::mem::take(&mut self.pending);
            pending.extend_from_slice(chunk);
            let base = self.pending_at;
            let used = self.run(&pending, base, read, limits)?;
            pending.drain(..used);
            self.pending = pending;
            self.pending_at = base + used as u64;
        }
        Ok(())
    }

    /// Reads every whole field of `bytes` (which start `base` bytes into the body); returns
    /// how many bytes it used.
    fn run(
        &mut self,
        bytes: &[u8],
        base: u64,
        read: u64,
        limits: ListLimits,
    ) -> Result<usize, ListBodyError> {
        let codec = O::protobuf().ok_or_else(|| {
            ListBodyError::Malformed(format!(
                "a protobuf body, which {} cannot decode",
                std::any::type_name::<O>()
            ))
        })?;
        let mut i = 0;
        loop {
            let at = base + i as u64;
            let rest = &bytes[i..];
            if self.stage == Stage::Magic {
                if rest.len() < protobuf::MAGIC.len() {
                    return Ok(i);
                }
                if !rest.starts_with(&protobuf::MAGIC) {
                    return Err(malformed(at, "no k8s\\0 magic prefix"));
                }
                i += protobuf::MAGIC.len();
                self.stage = Stage::Envelope;
                continue;
            }
            if let Stage::List { left: 0 } = self.stage {
                self.stage = Stage::Envelope;
            }
            if rest.is_empty() {
                return Ok(i);
            }
            let head = match field_head(rest) {
                Ok(Some(head)) => head,
                Ok(None) => return Ok(i),
                Err(what) => return Err(malformed(at, what)),
            };
            let whole = (head.head as u64).saturating_add(head.body);
            if let Stage::List { left } = self.stage
                && whole > left
            {
                return Err(malformed(
                    at,
                    "a field runs past the end of the list message",
                ));
            }
            if self.stage == Stage::Envelope && head.field == 2 && head.wire == 2 {
                // The list message: its fields are read one by one as they come.
                if !self.kind_ok {
                    return Err(malformed(
                        at,
                        &format!(
                            "the envelope does not say {} before its raw",
                            codec.list_kind
                        ),
                    ));
                }
                i += head.head;
                self.stage = Stage::List { left: head.body };
                continue;
            }
            let Ok(whole) = usize::try_from(whole) else {
                return Err(malformed(at, "a field longer than memory"));
            };
            if rest.len() < whole {
                return Ok(i);
            }
            let value = &rest[head.head..whole];
            let value_at = usize::try_from(at)
                .unwrap_or(usize::MAX)
                .saturating_add(head.head);
            match self.stage {
                Stage::Envelope => self.envelope_field(&head, value, at, codec.list_kind)?,
                Stage::List { ref mut left } => {
                    *left -= whole as u64;
                    if head.wire == 2 {
                        self.list_field(head.field, value, value_at, at, read, limits, codec)?;
                    }
                }
                Stage::Magic => {}
            }
            i += whole;
        }
    }

    /// A field of the envelope other than `raw`: `typeMeta` (its kind is checked),
    /// `contentEncoding` / `contentType` (must say plain protobuf).
    fn envelope_field(
        &mut self,
        head: &FieldHead,
        value: &[u8],
        at: u64,
        list_kind: &'static str,
    ) -> Result<(), ListBodyError> {
        if head.wire != 2 {
            return Ok(());
        }
        match head.field {
            1 => {
                let value_at = usize::try_from(at).unwrap_or(usize::MAX);
                let kind = protobuf::type_meta_kind(value, value_at.saturating_add(head.head))
                    .map_err(|e| malformed(at, &e.to_string()))?;
                if kind != list_kind {
                    return Err(malformed(
                        at,
                        &format!("the envelope holds a {kind:?}, expected a {list_kind}"),
                    ));
                }
                self.kind_ok = true;
            }
            3 | 4 => {
                let text = std::str::from_utf8(value).unwrap_or("(not UTF-8)");
                if !(text.is_empty() || head.field == 4 && text.starts_with(protobuf::MEDIA_TYPE)) {
                    return Err(malformed(
                        at,
                        &format!("the envelope says {text:?}: not plain protobuf"),
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// A field of the list message: `metadata`, or an item.
    #[allow(clippy::too_many_arguments)]
    fn list_field(
        &mut self,
        field: u32,
        value: &[u8],
        value_at: usize,
        at: u64,
        read: u64,
        limits: ListLimits,
        codec: protobuf::ProtobufCodec<O>,
    ) -> Result<(), ListBodyError> {
        match field {
            1 => protobuf::list_meta(&mut self.meta, value, value_at)
                .map_err(|e| ListBodyError::Malformed(e.to_string())),
            2 => {
                let index = self.items.len() + self.skipped.len();
                if index >= limits.max_items {
                    return Err(ListBodyError::TooManyItems {
                        limit: limits.max_items,
                        index,
                        at,
                    });
                }
                let limit = limits.limit(read);
                let held = self.charged.saturating_add(size_of::<O>() as u64);
                let too_large = |held| ListBodyError::TooLarge {
                    index,
                    at,
                    held,
                    limit,
                    read,
                    multiple: limits.multiple,
                    allowance: limits.allowance,
                };
                if held > limit {
                    return Err(too_large(held));
                }
                match (codec.decode)(value, value_at, limit - held) {
                    Ok((item, cost)) => {
                        self.charged = held.saturating_add(cost);
                        self.items.push(item);
                    }
                    Err(protobuf::ProtobufError {
                        kind: protobuf::ProtobufErrorKind::TooLarge { .. },
                        ..
                    }) => return Err(too_large(limit.saturating_add(1))),
                    Err(error) => {
                        let message = error.to_string();
                        self.charged = self
                            .charged
                            .saturating_add(size_of::<ItemError>() as u64)
                            .saturating_add(message.len() as u64);
                        self.skipped.push(ItemError { index, message });
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Ends the body, which was `read` bytes long.
    fn finish(self, read: u64) -> Result<ObjectList<O>, ListBodyError> {
        if self.stage != Stage::Envelope || !self.pending.is_empty() {
            return Err(malformed(read, "the body ends before the list does"));
        }
        let resource_version = self
            .meta
            .resource_version
            .filter(|rv| !rv.is_empty())
            .ok_or(ListBodyError::NoResourceVersion)?;
        Ok(ObjectList {
            resource_version,
            items: self.items,
            skipped: self.skipped,
            body_bytes: read,
            shard_selector: self.meta.shard_selector,
            continue_token: self.meta.continue_token.filter(|c| !c.is_empty()),
            remaining_item_count: self
                .meta
                .remaining_item_count
                .and_then(|n| u64::try_from(n).ok()),
        })
    }
}

fn malformed(at: u64, what: &str) -> ListBodyError {
    ListBodyError::Malformed(format!("{what} at byte {at}"))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde::Deserializer;
    use serde_json::value::RawValue;

    use super::*;
    use crate::wire::pod::PodView;

    #[derive(Deserialize)]
    struct FastList {
        #[serde(default)]
        metadata: HeaderMeta,
        #[serde(default, deserialize_with = "null_as_empty")]
        items: Vec<PodView>,
    }

    fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PodView>, D::Error> {
        Ok(Option::<Vec<PodView>>::deserialize(d)?.unwrap_or_default())
    }

    /// The whole-body parser this decoder replaced: serde_json over the whole list, then item
    /// by item when one item does not decode. The decoder must agree with it on every body.
    fn reference(body: &[u8]) -> Result<ObjectList<PodView>, ListBodyError> {
        #[derive(Deserialize)]
        struct RawList<'a> {
            #[serde(default)]
            metadata: HeaderMeta,
            #[serde(borrow, default)]
            items: Vec<&'a RawValue>,
        }
        let (metadata, items, skipped) = match serde_json::from_slice::<FastList>(body) {
            Ok(list) => (list.metadata, list.items, Vec::new()),
            Err(fast_error) => {
                let list = serde_json::from_slice::<RawList<'_>>(body)
                    .map_err(|_| ListBodyError::Malformed(fast_error.to_string()))?;
                let mut items = Vec::new();
                let mut skipped = Vec::new();
                for (index, raw) in list.items.into_iter().enumerate() {
                    match serde_json::from_str::<PodView>(raw.get()) {
                        Ok(item) => items.push(item),
                        Err(e) => skipped.push(ItemError {
                            index,
                            message: e.to_string(),
                        }),
                    }
                }
                (list.metadata, items, skipped)
            }
        };
        let resource_version = metadata
            .resource_version
            .filter(|rv| !rv.is_empty())
            .ok_or(ListBodyError::NoResourceVersion)?;
        Ok(ObjectList {
            resource_version,
            items,
            skipped,
            body_bytes: body.len() as u64,
            shard_selector: metadata.shard_info.and_then(|i| i.selector),
            continue_token: metadata.continue_token.filter(|c| !c.is_empty()),
            remaining_item_count: metadata
                .remaining_item_count
                .and_then(|n| u64::try_from(n).ok()),
        })
    }

    fn decode(body: &[u8], chunk: usize) -> Result<ObjectList<PodView>, ListBodyError> {
        let mut decoder = ListDecoder::<PodView>::new();
        for piece in body.chunks(chunk.max(1)) {
            decoder.push(piece)?;
        }
        decoder.finish()
    }

    /// What both parsers must agree on: the items and skips, or that the body failed (the
    /// messages differ: the decoder gives body offsets, the reference serde's line:column).
    fn outline(result: &Result<ObjectList<PodView>, ListBodyError>) -> String {
        match result {
            Ok(list) => format!(
                "ok rv={} items={:?} skipped={:?}",
                list.resource_version,
                list.items
                    .iter()
                    .map(|p| p.metadata.name.as_deref().unwrap_or("-"))
                    .collect::<Vec<_>>(),
                list.skipped.iter().map(|s| s.index).collect::<Vec<_>>(),
            ),
            Err(ListBodyError::NoResourceVersion) => "no resourceVersion".into(),
            Err(ListBodyError::Malformed(_)) => "malformed".into(),
            Err(e @ (ListBodyError::TooLarge { .. } | ListBodyError::TooManyItems { .. })) => {
                format!("bound: {e}")
            }
        }
    }

    fn pod(name: &str) -> String {
        format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"ns","labels":{{"cell":"c\"}}]{{"}},"resourceVersion":"1"}},"spec":{{"nodeName":"n"}},"status":{{"phase":"Running"}}}}"#
        )
    }

    #[test]
    fn every_chunk_size_decodes_the_same_list() {
        let body = format!(
            "{{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"42\",\"continue\":\"\"}},\"items\":[{},{} , {}\n]}}\n",
            pod("a"),
            pod("b\\u0062"),
            pod("c")
        );
        let whole = outline(&decode(body.as_bytes(), body.len()));
        assert_eq!(whole, r#"ok rv=42 items=["a", "bb", "c"] skipped=[]"#);
        for chunk in 1..body.len() {
            assert_eq!(
                outline(&decode(body.as_bytes(), chunk)),
                whole,
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn metadata_after_items_and_escaped_member_names_are_read() {
        let body = format!(
            r#"{{"\u0069tems":[{}],"meta\u0064ata":{{"resourceVersion":"9"}}}}"#,
            pod("a")
        );
        let list = decode(body.as_bytes(), 3).unwrap();
        assert_eq!(list.resource_version, "9");
        assert_eq!(list.items.len(), 1);
    }

    #[test]
    fn an_item_that_does_not_decode_is_skipped_with_its_index() {
        let body = format!(
            r#"{{"metadata":{{"resourceVersion":"5"}},"items":[{},{{"metadata":7}},"text",{}]}}"#,
            pod("a"),
            pod("d")
        );
        let list = decode(body.as_bytes(), 7).unwrap();
        assert_eq!(list.items.len(), 2);
        let indices: Vec<usize> = list.skipped.iter().map(|s| s.index).collect();
        assert_eq!(indices, [1, 2]);
        assert!(
            list.skipped[0].message.contains("invalid type"),
            "{:?}",
            list.skipped
        );
    }

    #[test]
    fn bad_bodies_say_what_and_where() {
        let cases: [(&str, &str); 11] = [
            (
                "{\"items\":[\n{\"a\":\n}]}",
                "items[0]: expected value at byte 17",
            ),
            ("", "ends before the list does at byte 0"),
            ("[1]", "expected `{` (a list object) at byte 0"),
            (r#"{"items":[{"a":}]}"#, "items[0]: expected value"),
            (
                r#"{"items":[{}}"#,
                "expected `,` or `]` after an item at byte 12",
            ),
            (r#"{"items":[{},]}"#, "expected an item at byte 13"),
            (r#"{"items":{}}"#, "`items` is not an array at byte 9"),
            (r#"{"items":[],"items":[]}"#, "duplicate member `items`"),
            (
                r#"{"metadata":{"resourceVersion":"1"}} x"#,
                "trailing characters after the list at byte 37",
            ),
            (
                r#"{"metadata":{"resourceVersion":1},"items":[]}"#,
                "list metadata: invalid type",
            ),
            (
                r#"{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}}"#,
                "ends before the list does",
            ),
        ];
        for (body, expected) in cases {
            match decode(body.as_bytes(), 4) {
                Err(ListBodyError::Malformed(message)) => {
                    assert!(message.contains(expected), "{body}: {message}");
                }
                other => panic!("{body}: {other:?}"),
            }
        }
        assert_eq!(
            decode(br#"{"metadata":{},"items":null}"#, 2).unwrap_err(),
            ListBodyError::NoResourceVersion
        );
        let empty = decode(br#"{"metadata":{"resourceVersion":"3"},"items":null}"#, 2).unwrap();
        assert!(empty.items.is_empty());
    }

    #[test]
    fn an_error_stays() {
        let mut decoder = ListDecoder::<PodView>::new();
        let first = decoder.push(b"[").unwrap_err();
        assert_eq!(decoder.push(b"{}").unwrap_err(), first);
        assert_eq!(decoder.finish().unwrap_err(), first);
    }

    /// A body assembled from fragments that are mostly right, so that the cases are near the
    /// edges: whitespace, escapes, nesting, literals, bad items, truncation.
    fn body_strategy() -> impl Strategy<Value = String> {
        let item = prop_oneof![
            4 => "[a-z]{1,3}".prop_map(|n| pod(&n)),
            1 => Just(r#"{"metadata":{"name":"x","namespace":"n","labels":{"k\\\"}":"v]"}}}"#.to_owned()),
            1 => Just(r#"{"metadata":5}"#.to_owned()),
            1 => Just(r#"{"metadata":{"name":"é日本\u00e9","namespace":"ñ"}}"#.to_owned()),
            1 => Just("null".to_owned()),
            1 => Just("12".to_owned()),
            1 => Just(r#""s\"]""#.to_owned()),
            1 => Just(r#"{"a":[1,{"b":"}"}]}"#.to_owned()),
            1 => Just(r#"{"a":}"#.to_owned()),
            1 => Just("tru".to_owned()),
            1 => Just(r#"{"a":[1}]"#.to_owned()),
        ];
        let ws = prop_oneof![Just(""), Just(" "), Just("\n\t"), Just("\r\n ")];
        (
            proptest::collection::vec((item, ws.clone()), 0..5),
            ws,
            prop_oneof![
                Just(r#""metadata":{"resourceVersion":"77"}"#),
                Just(r#""metadata":{"resourceVersion":""}"#),
                Just(r#""metadata":{}"#),
                Just(r#""kind":"PodList""#),
                Just(r#""metadata":[]"#),
            ],
            any::<bool>(),
            0usize..4,
        )
            .prop_map(|(items, ws, member, metadata_first, tail)| {
                let items: Vec<String> = items
                    .into_iter()
                    .map(|(item, ws)| format!("{ws}{item}{ws}"))
                    .collect();
                let items = format!(r#""items":[{}]"#, items.join(","));
                let members = if metadata_first {
                    format!("{member},{ws}{items}")
                } else {
                    format!("{items}{ws},{member}")
                };
                let tail = ["", " ", "}", "x"][tail];
                format!("{ws}{{{members}}}{tail}")
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn agrees_with_the_whole_body_parser(body in body_strategy(), chunk in 1usize..64, cut in 0usize..100) {
            let expected = outline(&reference(body.as_bytes()));
            prop_assert_eq!(&outline(&decode(body.as_bytes(), chunk)), &expected, "{}", body);
            // The budget changes nothing under its bound: the unbudgeted path agrees.
            let mut unbounded = ListDecoder::<PodView>::with_limits(ListLimits::unbounded());
            let pushed = body.as_bytes().chunks(chunk).try_for_each(|c| unbounded.push(c));
            let unbounded = pushed.and_then(|()| unbounded.finish());
            prop_assert_eq!(&outline(&unbounded), &expected, "{}", body);
            // A good body cut short never decodes as a list.
            let cut = body.len() * cut / 100;
            if expected.starts_with("ok") && cut < body.trim_end().len() {
                let truncated = outline(&decode(&body.as_bytes()[..cut], chunk));
                prop_assert!(!truncated.starts_with("ok"), "{}", &body[..cut]);
            }
        }

        #[test]
        fn agrees_on_invalid_utf8(body in body_strategy(), chunk in 1usize..64, at in 0usize..1000, byte in 0x80u8..=0xff) {
            let mut bytes = body.into_bytes();
            if !bytes.is_empty() {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
            let ours = outline(&decode(&bytes, chunk));
            let theirs = outline(&reference(&bytes));
            // The reference skips unknown fields without checking their UTF-8 when every
            // item decodes, but rejects them on its item-by-item fallback. The decoder always
            // skips them unchecked: it may accept a body that the fallback refused.
            let fast_path = serde_json::from_slice::<FastList>(&bytes).is_ok();
            if fast_path || theirs != "malformed" {
                prop_assert_eq!(ours, theirs);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), chunk in 1usize..16) {
            let _ = decode(&bytes, chunk);
        }
    }

    #[test]
    fn a_page_tells_its_continue_token_and_remaining_count() {
        let body = br#"{"metadata":{"resourceVersion":"9","continue":"abc","remainingItemCount":4},"items":[]}"#;
        let list = decode(body, 3).unwrap();
        assert_eq!(list.continue_token.as_deref(), Some("abc"));
        assert_eq!(list.remaining_item_count, Some(4));
        assert_eq!(list.shard_selector, None);
        let body = br#"{"metadata":{"resourceVersion":"9","shardInfo":{"selector":"shardRange(object.metadata.uid, '0x0', '0x1')"}},"items":[]}"#;
        for list in [
            parse_list::<PodView>(body).unwrap(),
            decode(body, 7).unwrap(),
        ] {
            assert_eq!(
                list.shard_selector.as_deref(),
                Some("shardRange(object.metadata.uid, '0x0', '0x1')"),
                "a LIST filtered by shard says so"
            );
        }
        let last = br#"{"metadata":{"resourceVersion":"9","continue":"","remainingItemCount":-1},"items":[]}"#;
        let list = decode(last, 3).unwrap();
        assert_eq!(list.continue_token, None, "an empty token ends the listing");
        assert_eq!(list.remaining_item_count, None);
    }

    #[test]
    fn list_skips_items_that_do_not_decode() {
        let list: ObjectList<PodView> = parse_list(
            br#"{"kind":"PodList","metadata":{"resourceVersion":"12"},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":1}},{"metadata":{"name":"c"}}]}"#,
        )
        .unwrap();
        assert_eq!(list.resource_version, "12");
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.skipped.len(), 1);
        assert_eq!(list.skipped[0].index, 1);
    }

    #[test]
    fn list_without_version_or_shape_is_an_error() {
        assert_eq!(
            parse_list::<PodView>(br#"{"metadata":{},"items":[]}"#).unwrap_err(),
            ListBodyError::NoResourceVersion
        );
        assert!(matches!(
            parse_list::<PodView>(b"nope"),
            Err(ListBodyError::Malformed(_))
        ));
        let empty =
            parse_list::<PodView>(br#"{"metadata":{"resourceVersion":"5"},"items":null}"#).unwrap();
        assert!(empty.items.is_empty());
    }
}
