//! nd-shim's private-data and read-limit rules (`docs/nd-semantics.md`, "Private data", "Read
//! limits"): the private-data limits per message; a whole handshake's read-limit negotiation
//! through `rdma_conn_param`'s u8 fields and the IB CM's swap, where neither side may end up
//! issuing more reads than the other serves or than its adapter allows; the getters' buffer
//! rules; and the port-range setting's parser.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nd_shim::connection_data::{
    fill_private_data, AdapterReadLimits, PeerData, PeerReadLimits, PrivateDataUse, ReadLimits,
};
use nd_shim::ports::PortRange;
use nd_shim::NdStatus;
use rxe_rs_fuzz::Input;

fn limits(inp: &mut Input) -> ReadLimits {
    ReadLimits::new(inp.len32(), inp.len32())
}

fn adapter(inp: &mut Input) -> AdapterReadLimits {
    AdapterReadLimits {
        max_inbound: inp.len32(),
        max_outbound: inp.len32(),
    }
}

fuzz_target!(|data: &[u8]| {
    let mut inp = Input::new(data);
    match inp.u8() % 4 {
        0 => {
            let len = if inp.bool() {
                inp.u64() as usize
            } else {
                usize::from(inp.u8())
            };
            for (u, limit) in [
                (PrivateDataUse::Connect, 56),
                (PrivateDataUse::Accept, 196),
                (PrivateDataUse::Reject, 148),
            ] {
                assert_eq!(u.limit(), limit);
                let model = if len > limit {
                    Err(NdStatus::ND_INVALID_BUFFER_SIZE)
                } else {
                    Ok(())
                };
                assert_eq!(u.check(len), model);
            }
        }
        1 => {
            // One handshake. The active side's Connect, capped to its adapter, on the wire.
            let (ask_a, ad_a, ask_p, ad_p) = (limits(&mut inp), adapter(&mut inp), limits(&mut inp), adapter(&mut inp));
            let req = ask_a.capped_to(ad_a);
            assert!(req.inbound <= ad_a.max_inbound && req.outbound <= ad_a.max_outbound);
            assert!(req.inbound <= ask_a.inbound && req.outbound <= ask_a.outbound);
            let (rr, id) = req.to_conn_param();
            assert_eq!(u32::from(rr), req.inbound.min(255));
            assert_eq!(u32::from(id), req.outbound.min(255));
            // The IB CM swaps them into the receiver's terms.
            let offer_a = PeerReadLimits::from_event_param(id, rr);
            let mut passive = PeerData::default();
            passive.record_read_limits(offer_a);
            // Before Accept, GetReadLimits shows the request from the passive side, capped.
            let seen = passive.read_limits(ad_p).unwrap();
            assert!(seen.inbound <= ad_p.max_inbound && seen.outbound <= ad_p.max_outbound);
            let eff_p = passive.negotiate(ask_p, ad_p);
            assert_eq!(passive.read_limits(ad_p), Ok(eff_p));
            let (rr, id) = eff_p.to_conn_param();
            let offer_p = PeerReadLimits::from_event_param(id, rr);
            let mut active = PeerData::default();
            assert_eq!(active.read_limits(ad_a), Err(NdStatus::ND_CONNECTION_INVALID));
            active.record_read_limits(offer_p);
            let eff_a = active.negotiate(ask_a, ad_a);
            // What each side programs into its QP: never more reads in flight than the other
            // serves, never more than its adapter or its own request allows.
            let (a_in, a_out) = eff_a.to_conn_param();
            let (p_in, p_out) = eff_p.to_conn_param();
            assert!(a_out <= p_in, "active issues {a_out} reads, passive serves {p_in}");
            assert!(p_out <= a_in, "passive issues {p_out} reads, active serves {a_in}");
            for (eff, ask, ad) in [(eff_a, ask_a, ad_a), (eff_p, ask_p, ad_p)] {
                assert!(eff.inbound <= ask.inbound.min(ad.max_inbound));
                assert!(eff.outbound <= ask.outbound.min(ad.max_outbound));
            }
        }
        2 => {
            let data_len = usize::from(inp.u8());
            let data = inp.bytes(data_len).to_vec();
            let n = usize::from(inp.u8());
            let mut buffer = vec![0xeeu8; n];
            let f = fill_private_data(&data, &mut buffer);
            assert_eq!(f.required, data.len());
            let short = n < data.len();
            assert_eq!(
                f.status,
                if short {
                    NdStatus::ND_BUFFER_OVERFLOW
                } else {
                    NdStatus::ND_SUCCESS
                }
            );
            let k = n.min(data.len());
            assert_eq!(&buffer[..k], &data[..k]);
            assert!(buffer[k..].iter().all(|&b| b == 0xee));
            let mut pd = PeerData::default();
            let mut other = vec![0u8; n];
            assert_eq!(pd.fill_private_data(&mut other), Err(NdStatus::ND_CONNECTION_INVALID));
            pd.record_private_data(&data);
            assert_eq!(pd.fill_private_data(&mut other), Ok(f));
            assert_eq!(&other[..k], &data[..k]);
            assert!(other[k..].iter().all(|&b| b == 0));
        }
        _ => {
            // ND_SHIM_PORT_RANGE: "lo-hi", whitespace around, 1 <= lo <= hi.
            let text = String::from_utf8_lossy(inp.rest()).into_owned();
            let r = PortRange::parse(&text);
            let model = text.trim().split_once('-').and_then(|(lo, hi)| {
                let p = |s: &str| {
                    let s = s.trim();
                    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| s.parse::<u16>().ok())
                        .flatten()
                };
                let (lo, hi) = (p(lo)?, p(hi)?);
                (lo >= 1 && lo <= hi).then_some((lo, hi))
            });
            assert_eq!(r.as_ref().ok().map(|r| (r.first(), r.last())), model, "{text:?}");
            if let Ok(r) = r {
                assert_eq!(r.port_count(), u32::from(r.last() - r.first()) + 1);
                assert!(r.contains(r.first()) && r.contains(r.last()));
            }
        }
    }
});
