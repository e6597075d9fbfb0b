//! Flow steering: the flow spec records and create/destroy flow.

use crate::layout::abi;
use zerocopy::IntoBytes;

abi! {
    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_spec_hdr [size 8] {
        0 => pub r#type: u32,
        4 => pub size: u16,
        6 => pub reserved: u16,
        8 => pub flow_spec_data: [u64; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_eth_filter [size 16] {
        0 => pub dst_mac: [u8; 6],
        6 => pub src_mac: [u8; 6],
        /// Big-endian (`__be16`).
        12 => pub ether_type: u16,
        /// Big-endian (`__be16`).
        14 => pub vlan_tag: u16,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_spec_head_fields [size 8, anonymous] {
        0 => pub r#type: u32,
        4 => pub size: u16,
        6 => pub reserved: u16,
    }

    pub union ib_uverbs_flow_spec_head [size 8, anonymous] {
        0 => pub hdr: ib_uverbs_flow_spec_hdr,
        0 => pub fields: ib_uverbs_flow_spec_head_fields,
    }

    pub struct ib_uverbs_flow_spec_eth [size 40] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_eth_filter,
        24 => pub mask: ib_uverbs_flow_eth_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_ipv4_filter [size 12] {
        /// Big-endian (`__be32`).
        0 => pub src_ip: u32,
        /// Big-endian (`__be32`).
        4 => pub dst_ip: u32,
        8 => pub proto: u8,
        9 => pub tos: u8,
        10 => pub ttl: u8,
        11 => pub flags: u8,
    }

    pub struct ib_uverbs_flow_spec_ipv4 [size 32] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_ipv4_filter,
        20 => pub mask: ib_uverbs_flow_ipv4_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_tcp_udp_filter [size 4] {
        /// Big-endian (`__be16`).
        0 => pub dst_port: u16,
        /// Big-endian (`__be16`).
        2 => pub src_port: u16,
    }

    pub struct ib_uverbs_flow_spec_tcp_udp [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_tcp_udp_filter,
        12 => pub mask: ib_uverbs_flow_tcp_udp_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_ipv6_filter [size 40] {
        0 => pub src_ip: [u8; 16],
        16 => pub dst_ip: [u8; 16],
        /// Big-endian (`__be32`).
        32 => pub flow_label: u32,
        36 => pub next_hdr: u8,
        37 => pub traffic_class: u8,
        38 => pub hop_limit: u8,
        39 => pub reserved: u8,
    }

    pub struct ib_uverbs_flow_spec_ipv6 [size 88] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_ipv6_filter,
        48 => pub mask: ib_uverbs_flow_ipv6_filter,
    }

    pub struct ib_uverbs_flow_spec_action_tag [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub tag_id: u32,
        12 => pub reserved1: u32,
    }

    pub struct ib_uverbs_flow_spec_action_drop [size 8] {
        0 => pub head: ib_uverbs_flow_spec_head,
    }

    pub struct ib_uverbs_flow_spec_action_handle [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub handle: u32,
        12 => pub reserved1: u32,
    }

    pub struct ib_uverbs_flow_spec_action_count [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub handle: u32,
        12 => pub reserved1: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_tunnel_filter [size 4] {
        /// Big-endian (`__be32`).
        0 => pub tunnel_id: u32,
    }

    pub struct ib_uverbs_flow_spec_tunnel [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_tunnel_filter,
        12 => pub mask: ib_uverbs_flow_tunnel_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_spec_esp_filter [size 8] {
        0 => pub spi: u32,
        4 => pub seq: u32,
    }

    pub struct ib_uverbs_flow_spec_esp [size 24] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_spec_esp_filter,
        16 => pub mask: ib_uverbs_flow_spec_esp_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_gre_filter [size 8] {
        /// Big-endian (`__be16`).
        0 => pub c_ks_res0_ver: u16,
        /// Big-endian (`__be16`).
        2 => pub protocol: u16,
        /// Big-endian (`__be32`).
        4 => pub key: u32,
    }

    pub struct ib_uverbs_flow_spec_gre [size 24] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_gre_filter,
        16 => pub mask: ib_uverbs_flow_gre_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_mpls_filter [size 4] {
        /// Big-endian (`__be32`).
        0 => pub label: u32,
    }

    pub struct ib_uverbs_flow_spec_mpls [size 16] {
        0 => pub head: ib_uverbs_flow_spec_head,
        8 => pub val: ib_uverbs_flow_mpls_filter,
        12 => pub mask: ib_uverbs_flow_mpls_filter,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_flow_attr [size 16] {
        0 => pub r#type: u32,
        4 => pub size: u16,
        6 => pub priority: u16,
        8 => pub num_of_specs: u8,
        9 => pub reserved: [u8; 2],
        11 => pub port: u8,
        12 => pub flags: u32,
        16 => pub flow_specs: [ib_uverbs_flow_spec_hdr; 0],
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_flow [size 24] {
        0 => pub comp_mask: u32,
        4 => pub qp_handle: u32,
        8 => pub flow_attr: ib_uverbs_flow_attr,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_create_flow_resp [size 8] {
        0 => pub comp_mask: u32,
        4 => pub flow_handle: u32,
    }

    #[derive(IntoBytes, Debug)]
    pub struct ib_uverbs_destroy_flow [size 8] {
        0 => pub comp_mask: u32,
        4 => pub flow_handle: u32,
    }
}
