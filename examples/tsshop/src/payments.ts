export function chargeCard(amountCents: number): boolean {
  return amountCents > 0;
}
