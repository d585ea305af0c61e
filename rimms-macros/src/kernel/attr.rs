//! The model of `#[rimms::kernel(…)]`'s arguments: `api = PATH`, `device = KIND` or a list
//! `[KIND, KIND(N), …]`, `accepts = PATH` and `crate = PATH`, as written. Only the syntax is judged here; which
//! kinds exist and which combinations make sense is [`super::check`]'s business, so every such
//! mistake is reported at once.

use crate::crate_path;
use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{bracketed, parenthesized, Ident, LitInt, Path, Token};

pub struct Attr {
    pub api: Option<Path>,
    pub devices: Vec<DeviceSpec>,
    /// Where `device` was written, for errors about the list as a whole.
    pub device_key: Option<Span>,
    /// `accepts = …`: the implementation's check of the calls its device takes, as written
    /// (any expression; that it names a function is the check's business).
    pub accepts: Vec<syn::Expr>,
    pub krate: Option<Path>,
}

/// One `device = …` entry: a kind and, for a stand-alone kernel, an instance.
pub struct DeviceSpec {
    pub kind: Ident,
    pub index: Option<LitInt>,
}

impl Parse for DeviceSpec {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let kind: Ident = input.parse()?;
        let index = if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            Some(content.parse()?)
        } else {
            None
        };
        Ok(DeviceSpec { kind, index })
    }
}

impl Parse for Attr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut attr = Attr {
            api: None,
            devices: Vec::new(),
            device_key: None,
            accepts: Vec::new(),
            krate: None,
        };
        while !input.is_empty() {
            let key = input.call(Ident::parse_any)?;
            input.parse::<Token![=]>()?;
            if key == "api" {
                attr.api = Some(input.parse()?);
            } else if key == "device" {
                attr.device_key = Some(key.span());
                if input.peek(syn::token::Bracket) {
                    let content;
                    bracketed!(content in input);
                    let list = Punctuated::<DeviceSpec, Token![,]>::parse_terminated(&content)?;
                    attr.devices.extend(list);
                } else {
                    attr.devices.push(input.parse()?);
                }
            } else if key == "accepts" {
                attr.accepts.push(input.parse()?);
            } else if key == "crate" {
                attr.krate = Some(crate_path::parse_value(input)?);
            } else {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown argument `{key}`: expected `api = NAME`, `device = cpu | sim | fpga | gpu`, `accepts = FUNCTION` and `crate = PATH`"),
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(attr)
    }
}
