// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {splitSignature} from "EIP3009Token.sol";

/// Test-only smart-contract wallet (an ERC-1271 account with one owner key): a signature is
/// valid when the owner's ECDSA signature of the hash is given either as its 65 bytes or wrapped
/// as abi.encode(bytes) (a longer signature, as Coinbase Smart Wallet's SignatureWrapper is).
contract TestSmartWallet {
    address public immutable owner;
    uint256 private constant HALF_N = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0;

    constructor(address owner_) {
        owner = owner_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        bytes memory sig = signature.length == 65 ? signature : abi.decode(signature, (bytes));
        return _signer(hash, sig) == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }

    function _signer(bytes32 hash, bytes memory sig) private pure returns (address) {
        if (sig.length != 65) return address(0);
        (bytes32 r, bytes32 s, uint8 v) = splitSignature(sig);
        if (uint256(s) > HALF_N || (v != 27 && v != 28)) return address(0);
        return ecrecover(hash, v, r, s);
    }
}

/// Test-only CREATE2 factory of TestSmartWallet: the address is known before deployment, which is
/// what an ERC-6492 signature of a counterfactual wallet carries (this factory and createAccount's calldata).
contract TestSmartWalletFactory {
    function createAccount(address owner, uint256 salt) external returns (address) {
        address predicted = getAddress(owner, salt);
        if (predicted.code.length > 0) return predicted;
        return address(new TestSmartWallet{salt: bytes32(salt)}(owner));
    }

    function getAddress(address owner, uint256 salt) public view returns (address) {
        bytes32 code = keccak256(abi.encodePacked(type(TestSmartWallet).creationCode, abi.encode(owner)));
        return address(uint160(uint256(keccak256(abi.encodePacked(bytes1(0xff), address(this), bytes32(salt), code)))));
    }
}
