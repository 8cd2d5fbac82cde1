import { chargeCard } from "./payments";

export function checkout(totalCents: number): string {
  // Every caller checks the result.
  return chargeCard(totalCents) ? "paid" : "declined";
}
